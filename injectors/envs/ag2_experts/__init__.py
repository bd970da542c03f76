"""The `ag2_experts` environment on AG2: `tasks` (the questions and their answers), `env` (the team and
the Environment), `mistakes` (its error generators). Importing the package registers the
environment."""

from .env import Ag2Experts

__all__ = ["Ag2Experts"]
