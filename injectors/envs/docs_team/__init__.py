"""The `docs_team` environment on Haystack's Agent: `world` (the annual reports and their questions), `policy`
(the simulated lead and researcher), `env` (the Environment), `mistakes` (its error rules). Importing the package
registers the environment."""

from .env import DocsTeam

__all__ = ["DocsTeam"]
