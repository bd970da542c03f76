"""The `chart_desk` environment on PydanticAI: `world` (the charts and tasks, drawn like `chart_qa`'s), `policy` (the
simulated agents), `env` (the Environment), `mistakes` (its error rules). Importing the package registers it."""

from .env import ChartDesk

__all__ = ["ChartDesk"]
