"""scripts/detect_data.py: an environment whose framework lives in another virtualenv is run by this script under
that virtualenv's python, its runs merged byte for byte; a missing virtualenv is one error saying how to make it."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from faultlens.injectors import envs
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "detect_data.py"


@pytest.fixture(scope="module")
def detect_data() -> ModuleType:
    return load_script("detect_data")


def test_an_environment_not_importable_here_is_run_by_its_extras_python_and_gives_the_same_bytes(detect_data, tmp_path, monkeypatch):
    # math_react pretends its framework is missing here; its "extra's virtualenv" is this very interpreter, which
    # (a fresh process, not pretending) makes the runs: they must be the bytes a direct run writes.
    monkeypatch.setattr(type(envs.get("math_react")), "requires", ("no_such_framework_module",))
    monkeypatch.setenv("FAULTLENS_FRAMEWORKS_PYTHON", sys.executable)
    assert detect_data.interpreter("math_react") == Path(sys.executable).absolute()
    (tmp_path / "merged").mkdir()
    (tmp_path / "direct").mkdir()  # the same file name in both: gzip's header holds it
    merged, direct = tmp_path / "merged" / "runs.jsonl.gz", tmp_path / "direct" / "runs.jsonl.gz"
    assert detect_data.main(["--envs", "math_react", "--tasks", "1", "--workers", "1", "--out", str(merged)]) == 0
    subprocess.run([sys.executable, str(SCRIPT), "--envs", "math_react", "--tasks", "1", "--workers", "1", "--out", str(direct)],
                   check=True, capture_output=True)
    assert merged.read_bytes() == direct.read_bytes()
    assert b"math_react-0-0-seed" in gzip.decompress(merged.read_bytes())


def test_a_missing_virtualenv_is_one_error_saying_how_to_make_it(detect_data, tmp_path, monkeypatch):
    env = envs.get("search_crew")
    if not env.missing():
        pytest.skip("CrewAI is installed here: search_crew runs in this interpreter")
    monkeypatch.chdir(tmp_path)  # no .venv-frameworks2 here
    monkeypatch.delenv("FAULTLENS_FRAMEWORKS2_PYTHON", raising=False)
    with pytest.raises(SystemExit, match="make frameworks2"):
        detect_data.interpreter("search_crew")
    assert detect_data.interpreter("table_qa") is None  # our own environments run here
