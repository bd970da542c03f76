"""Error rules of `supervisor_team`."""
MUTATORS: dict = {}
