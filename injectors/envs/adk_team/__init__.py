"""The `adk_team` environment on Google ADK: `world` (the trips, tools and reference answers), `policy` (the
simulated agents), `env` (the Environment and the ADK team), `mistakes` (its error generators). Importing the
package registers the environment."""

from .env import AdkTeam

__all__ = ["AdkTeam"]
