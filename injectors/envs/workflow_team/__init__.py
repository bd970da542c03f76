"""The `workflow_team` environment on LlamaIndex's AgentWorkflow: `world` (the travel agency and its tasks),
`policy` (the simulated agents), `env` (the Environment), `mistakes` (its error rules). Importing the package
registers the environment."""

from .env import WorkflowTeam

__all__ = ["WorkflowTeam"]
