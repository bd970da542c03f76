"""The `airline_desk` environment on an Agno Team: `world` (the bookings, fare policies and requests), `policy`
(the simulated coordinator and members), `env` (the Environment), `mistakes` (its error rules). Importing the
package registers the environment."""

from .env import AirlineDesk

__all__ = ["AirlineDesk"]
