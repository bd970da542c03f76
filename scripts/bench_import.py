"""Measure the light core install: what `pip install faultlens` brings, and how fast the tracer and the CLI start.

    python scripts/bench_import.py [--repeats 7] [--venv DIR] [--keep]

Makes a fresh virtualenv (or reuses `--venv`), installs this checkout without
extras (`pip install .`, the same as `pip install faultlens`), and reports:

- packages: how many distributions the install added to the fresh venv (the
  venv's own pip and setuptools are not counted) and their size on disk;
- start-up: wall time of a fresh interpreter for each of

      import opentelemetry.sdk.trace             (the baseline for the tracer)
      from faultlens.middleware import Tracer
      import click, rich                         (the baseline for the CLI)
      faultlens --help
      faultlens traces list                      (an empty store in a temp dir)

  each the median of the repeats, the commands interleaved so that drifting
  machine load hits all alike, and the ratios the issue asks for.

A benchmark, not a test: read the ratios (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def installed(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], check=True, capture_output=True, text=True).stdout
    return {row["name"].lower(): row["version"] for row in json.loads(out)}


def site_size(python: Path) -> int:
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    return sum(p.stat().st_size for p in Path(site).rglob("*") if p.is_file())


def make_venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(where)
    return where / "bin" / "python"


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--venv", type=Path, help="reuse this virtualenv (made and installed into if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary virtualenv")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="faultlens-core-"))
    where = args.venv or tmp / "venv"
    python = where / "bin" / "python"
    fresh = not python.exists()
    if fresh:
        python = make_venv(where)
    before = installed(python)
    size_before = site_size(python)
    if fresh:
        print(f"installing {ROOT} without extras into {where} ...", file=sys.stderr)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT)], check=True)
    after = installed(python)
    added = sorted(set(after) - set(before)) if fresh else sorted(set(after) - {"pip", "setuptools", "wheel"})
    size = site_size(python) - (size_before if fresh else 0)

    bindir = python.parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "FAULTLENS_DB": str(tmp / "store.db")}
    env.pop("PYTHONPATH", None)
    commands = {
        "import opentelemetry.sdk.trace": [str(python), "-c", "import opentelemetry.sdk.trace"],
        "from faultlens.middleware import Tracer": [str(python), "-c", "from faultlens.middleware import Tracer"],
        "import click, rich": [str(python), "-c", "import click, rich"],
        "faultlens --help": [str(bindir / "faultlens"), "--help"],
        "faultlens traces list": [str(bindir / "faultlens"), "traces", "list"],
    }
    for cmd in commands.values():  # warm the disk cache and the .pyc files once
        timed(cmd, tmp, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, cmd in commands.items():
            times[name].append(timed(cmd, tmp, env))
    median = {name: statistics.median(ts) for name, ts in times.items()}

    print(f"core install: {len(added)} packages, {size / 1e6:.1f} MB ({', '.join(added)})")
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}; medians of {args.repeats}, interleaved")
    for name, seconds in median.items():
        print(f"  {name:<42} {seconds:6.3f} s")
    otel, click_rich = median["import opentelemetry.sdk.trace"], median["import click, rich"]
    print(f"Tracer import / otel SDK import:   {median['from faultlens.middleware import Tracer'] / otel:5.1f}x (at most 3x)")
    print(f"faultlens --help / click+rich:     {median['faultlens --help'] / click_rich:5.1f}x (at most 3x)")
    print(f"faultlens traces list / click+rich: {median['faultlens traces list'] / click_rich:5.1f}x (at most 8x)")
    if not args.keep and args.venv is None:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    elif fresh:
        print(f"kept {where}", file=sys.stderr)


if __name__ == "__main__":
    main()
