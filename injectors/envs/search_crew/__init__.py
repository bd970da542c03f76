"""The `search_crew` environment on a CrewAI Crew: `world` (the task's small web, its question families and the
answers), `policy` (the simulated manager and workers), `env` (the Environment), `llm` (CrewAI's OpenAI LLM on the
in-process endpoint; imported only in a run), `mistakes` (its error rules). Importing the package registers the
environment."""

from .env import SearchCrew

__all__ = ["SearchCrew"]
