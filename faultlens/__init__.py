"""faultlens: capture agent runs, attribute failures (who, when, why), validate attributors, feed lessons back.

The top-level folders of the repository are this package's subpackages
(`faultlens.middleware`, `faultlens.attributors`, `faultlens.injectors`,
`faultlens.feedback`, `faultlens.benchmark`); this package itself is the
application layer above them: the CLI root, the server's routes, `serve` and
`demo`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("faultlens")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
