"""faultlens attributors: who made a run fail, at which step, and why.

`build(method, model=None, **options)` makes an attributor; importing this
package registers the built-in methods.
"""

from .base import Attributor, BaseAttributor
from .registry import DEFAULT_METHOD, UnknownMethod, build, get, names, parse_options, register, uses_model

# Importing the method packages registers the built-in attributors (after the registry exists).
from . import learned, methods  # noqa: E402, F401  isort: skip

__all__ = ["DEFAULT_METHOD", "Attributor", "BaseAttributor", "UnknownMethod", "build", "get", "names", "parse_options", "register", "uses_model"]
