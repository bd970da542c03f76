"""The `magentic_team` environment on AutoGen Magentic-One: `tasks` (the questions over company
records), `wire` (names, limits and the chat-completion format), `policy` (the
simulated agents), `env` (the team and the Environment), `mistakes` (its error generators). Importing the
package registers the environment."""

from .env import MagenticTeam

__all__ = ["MagenticTeam"]
