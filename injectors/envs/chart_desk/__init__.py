"""The `chart_desk` environment on PydanticAI: `world` (the charts and tasks, drawn like `chart_qa`'s), `team` (the
PydanticAI agents), `policy` (the simulated agents), `env` (the Environment), `mistakes` (its error rules), `tracing`
(OpenInference capture). Importing the package registers the environment."""

from .env import ChartDesk

__all__ = ["ChartDesk"]
