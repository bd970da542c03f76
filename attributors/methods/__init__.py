"""The built-in attribution methods. Importing this package registers them all."""

from . import all_at_once, baselines, binary_search, counterfactual, heuristic, hybrid, step_by_step  # noqa: F401
from .all_at_once import AllAtOnce
from .baselines import FirstStep, LastStep, MajorityAgent, RandomAgent, RandomStep
from .binary_search import BinarySearch
from .counterfactual import Counterfactual
from .heuristic import SIGNALS, Heuristic
from .hybrid import Hybrid
from .llm_base import LLMAttributor
from .step_by_step import StepByStep

__all__ = [
    "AllAtOnce", "BinarySearch", "Counterfactual", "FirstStep", "Heuristic", "Hybrid", "LLMAttributor", "LastStep",
    "MajorityAgent", "RandomAgent", "RandomStep", "SIGNALS", "StepByStep",
]
