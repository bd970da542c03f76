"""Task environments for warm-start injection, and their registry.

`get(name)` returns an environment instance, `names()` lists them. Every
package in this folder is imported on first use, so a new environment is a new
package named as the environment, with an `@register`-decorated `Environment`
subclass (see `injectors.envs.base` for the interface). The modules beside the
packages are what environments share: `base`, `registry`, `framework` (real
agent frameworks behind the recording endpoint), `arithmetic`, `media_render`.
"""

from __future__ import annotations

from .base import Action, Environment, Runtime, RunResult, ToolSpec, parse_action, render_action
from .registry import get, names, register

__all__ = ["Action", "Environment", "RunResult", "Runtime", "ToolSpec", "get", "names", "parse_action", "register", "render_action"]
