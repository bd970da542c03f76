"""The `web_shop` environment: `world` (its tasks and what the agents and the error generators share),
`env` (the agents and the Environment), `mistakes` (its error generators). Importing the package
registers the environment."""

from .env import WebShop

__all__ = ["WebShop"]
