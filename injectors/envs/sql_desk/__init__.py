"""The `sql_desk` environment on Haystack's Agent: `world` (the task's SQLite database and its question), `policy`
(the simulated lead, schema reader and analyst), `env` (the Environment), `mistakes` (its error rules). Importing the
package registers the environment."""

from .env import SqlDesk

__all__ = ["SqlDesk"]
