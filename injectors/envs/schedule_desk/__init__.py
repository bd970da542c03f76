"""The `schedule_desk` environment on DSPy's `ReAct`: `world` (the calendars, their questions and the reference answers),
`policy` (the simulated solver), `env` (the Environment), `mistakes` (its error rules). Importing the package registers
the environment."""

from .env import ScheduleDesk

__all__ = ["ScheduleDesk"]
