"""The `smol_analyst` environment on smolagents: `tasks` (the sales questions), `env` (the code agent
and the Environment), `mistakes` (its error generators). Importing the package registers the
environment."""

from .env import SmolAnalyst

__all__ = ["SmolAnalyst"]
