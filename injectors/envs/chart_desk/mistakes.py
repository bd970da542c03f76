"""Error rules of `chart_desk` (tried before the generic ones)."""

MUTATORS: dict = {}
