"""`faultlens worker` with one extra attribution method, `slow-heuristic` (heuristic after a pause), for the scale-out test.

    python tests/faultlens/slow_worker.py --db URL --method slow-heuristic -O delay=0.4 ...

The pause makes sure a worker killed mid-way is holding a job, so the test
sees that job claimed again by another worker.
"""

from __future__ import annotations

import time

from faultlens.attributors import get
from faultlens.attributors.base import BaseAttributor
from faultlens.attributors.registry import register
from faultlens.cli import cli


class SlowHeuristic(BaseAttributor):
    name = "slow-heuristic"

    def __init__(self, delay: float = 0.4):
        self.delay = float(delay)
        self.inner = get("heuristic")

    def attribute(self, trace):
        time.sleep(self.delay)
        return self.inner.attribute(trace).model_copy(update={"method": self.name})


register("slow-heuristic", SlowHeuristic)

if __name__ == "__main__":
    cli(["worker", *__import__("sys").argv[1:]])
