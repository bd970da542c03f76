"""The `research_desk` environment: a LangGraph team of five agents that follow the lessons shown to
them (`env`). Importing the package registers the environment."""

from .env import ResearchDesk

__all__ = ["ResearchDesk"]
