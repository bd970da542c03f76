"""The replay lab: framework teams run as separate processes through the live gateway, their simulated agents as its upstream."""

from .agents import LAB_TENDENCIES, LabRun, SimulatedAgents, program_command

__all__ = ["LAB_TENDENCIES", "LabRun", "SimulatedAgents", "program_command"]
