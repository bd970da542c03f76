"""`pip install .` installs one import name, `faultlens`, and every subpackage in it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("middleware", "attributors", "injectors", "feedback", "benchmark")


def _declared_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def test_every_subpackage_is_declared():
    found = {"faultlens." + ".".join(init.parent.relative_to(ROOT).parts)
             for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")}
    found |= {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "faultlens").rglob("__init__.py")}
    assert found - _declared_packages() == set(), "add these to [tool.setuptools] packages in pyproject.toml"


@pytest.mark.slow
def test_wheel_installs_only_faultlens(tmp_path):
    # Build from a copy: setuptools leaves build/ and *.egg-info behind in the tree it builds.
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__", ".faultlens"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(source)], check=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("faultlens-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"faultlens"}
    assert "faultlens/benchmark/data/test.jsonl.gz" in names or any(n.startswith("faultlens/benchmark/data/") for n in names)
    assert "faultlens/attributors/learned/model.joblib" in names
    assert not any(n.startswith(("faultlens/examples", "examples/", "tests/")) for n in names)
