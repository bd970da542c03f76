"""The `math_society` environment on a CAMEL role-playing society: `world` (the word problems and their fact
sheets), `policy` (the simulated task specifier, instructor and solver), `env` (the Environment), `mistakes` (its
error rules). Importing the package registers the environment."""

from .env import MathSociety

__all__ = ["MathSociety"]
