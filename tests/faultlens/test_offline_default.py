"""Importing faultlens keeps litellm offline: its bundled model cost map, no fetch from GitHub."""

from __future__ import annotations

import os
import subprocess
import sys

SETTING = "LITELLM_LOCAL_MODEL_COST_MAP"


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)


def test_import_sets_the_local_cost_map_when_unset():
    env = {k: v for k, v in os.environ.items() if k != SETTING}
    done = _run(f"import faultlens.middleware, litellm, os; print(os.environ['{SETTING}'], 'gpt-4o-mini' in litellm.model_cost)", env)
    assert done.stdout.split() == ["True", "True"]
    # litellm warns when its fetch fails (no network here); with the local map it never tries.
    assert "model cost map" not in done.stderr


def test_a_users_setting_wins():
    # litellm is not imported here: with the setting off it would reach for the network.
    done = _run(f"import faultlens, os; print(os.environ['{SETTING}'])", {**os.environ, SETTING: "False"})
    assert done.stdout.split() == ["False"]
