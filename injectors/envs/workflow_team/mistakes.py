"""Error rules of `workflow_team` (tried before the generic ones)."""
MUTATORS = {}
