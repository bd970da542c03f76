"""faultlens attributors: who made a run fail, at which step, and why."""

from .base import Attributor, BaseAttributor
from .registry import get, names, register

__all__ = ["Attributor", "BaseAttributor", "get", "names", "register"]
