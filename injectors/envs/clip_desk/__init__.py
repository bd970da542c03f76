"""The `clip_desk` environment on an Agno Team with video frames: `world` (the clips, their frames and questions),
`policy` (the simulated lead and watcher), `env` (the Environment), `mistakes` (its error rules). Importing the
package registers the environment."""

from .env import ClipDesk

__all__ = ["ClipDesk"]
