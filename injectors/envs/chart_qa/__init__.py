"""The `chart_qa` environment: `world` (its tasks and what the agents and the error generators share),
`env` (the agents and the Environment), `mistakes` (its error generators). Importing the package
registers the environment."""

from .env import ChartQA

__all__ = ["ChartQA"]
