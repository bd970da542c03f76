"""examples/proxy_warm_start.py runs offline: the recorded run succeeds, the injected one fails with its gold label."""

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "proxy_warm_start.py"


def test_example_records_then_injects_offline():
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=180, check=True,
                         env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}).stdout
    lines = out.splitlines()
    assert lines[0].startswith("recorded run:") and lines[0].split(" -> ")[1].startswith("success")
    assert lines[1].startswith("injected run:") and "-> failure (1 replayed, 1 injected, 1 live)" in lines[1]
    assert lines[2].startswith("gold label: agent=researcher call=1 mode=R.3")
