"""The table world: the SQLite tables, their questions, and the vocabulary the agent and the error generators share."""

from __future__ import annotations

REGIONS = ["North", "South", "East", "West", "Central"]
CATEGORIES = ["garden", "kitchen", "toys", "tools", "office"]
YEARS = [2021, 2022, 2023, 2024]
