"""faultlens: capture agent runs, attribute failures (who, when, why), validate attributors, feed lessons back.

The top-level folders of the repository are this package's subpackages
(`faultlens.middleware`, `faultlens.attributors`, `faultlens.injectors`,
`faultlens.feedback`, `faultlens.benchmark`); this package itself is the
application layer above them: the CLI root, the server's routes, `serve` and
`demo`.
"""

import os

# Offline by default: litellm fetches its model cost map from GitHub when it is imported unless told not
# to, which costs seconds of retries (and warnings) on a machine without network. Every subpackage's
# import runs this first. Set LITELLM_LOCAL_MODEL_COST_MAP=False to let litellm fetch the current map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def __getattr__(name: str) -> str:
    # `__version__` is read from the installed metadata on first use: importlib.metadata costs more
    # than the rest of `faultlens --help`.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("faultlens")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"
