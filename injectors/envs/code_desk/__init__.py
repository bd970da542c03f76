"""The `code_desk` environment on Strands Agents (agents as tools): `world` (the specs, the hidden tests),
`policy` (the simulated lead, coder and tester), `env` (the Environment), `mistakes` (its error rules), `tracing`
(the OpenInference capture of Strands' own spans). Importing the package registers the environment."""

from .env import CodeDesk

__all__ = ["CodeDesk"]
