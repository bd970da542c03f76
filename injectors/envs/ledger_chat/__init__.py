"""The `ledger_chat` environment on a Semantic Kernel group chat: `world` (the company ledger, its questions and
answers), `policy` (the simulated analyst, reviewer and reporter), `env` (the Environment), `mistakes` (its error
rules), `tracing` (SK's own spans for `--otlp`). Importing the package registers the environment."""

from .env import LedgerChat

__all__ = ["LedgerChat"]
