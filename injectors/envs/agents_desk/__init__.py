"""The `agents_desk` environment on the OpenAI Agents SDK: `world` (the shop's catalogue and tasks),
`policy` (the simulated agents), `wire` (chat-completion messages), `env` (the Environment),
`mistakes` (its error generators). Importing the package registers the environment."""

from .env import AgentsDesk

__all__ = ["AgentsDesk"]
