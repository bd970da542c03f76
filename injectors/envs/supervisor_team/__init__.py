"""The `supervisor_team` environment on LangGraph's prebuilt supervisor: `world` (the store, tasks and tools),
`policy` (the simulated agents), `seams` (deterministic framework ids), `env` (the Environment), `mistakes` (its
error rules). Importing the package registers the environment."""

from .env import SupervisorTeam

__all__ = ["SupervisorTeam"]
