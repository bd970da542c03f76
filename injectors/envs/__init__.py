"""Task environments for warm-start injection, and their registry.

`get(name)` returns an environment instance, `names()` lists them. Every module
or package in this folder (except `base` and `registry`) is imported on first
use, so a new environment is a new module or package with an
`@register`-decorated `Environment` subclass; see `injectors.envs.base` for the
interface.
"""

from __future__ import annotations

from .base import Action, Environment, Runtime, RunResult, ToolSpec, parse_action, render_action
from .registry import get, names, register

__all__ = ["Action", "Environment", "RunResult", "Runtime", "ToolSpec", "get", "names", "parse_action", "register", "render_action"]
