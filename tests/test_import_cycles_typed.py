"""The import cycles issue 46 broke stay broken, counting imports under `if TYPE_CHECKING:` too.

`tests/test_imports.py` finds the cycles of imports that run; a cycle closed
only by a type-checking import still ties the modules together for a reader
(and for an import order that once failed: `import faultlens.injectors.sim`
on its own), so these modules must be in none, whatever kind of import.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import test_imports

UNTANGLED = ("faultlens.benchmark.plots", "faultlens.benchmark.report", "faultlens.injectors.sim",
             "faultlens.injectors.envs.base", "faultlens.injectors.envs.registry")


@pytest.fixture
def typed_cycles(monkeypatch) -> list[frozenset[str]]:
    monkeypatch.setattr(test_imports, "_type_checking", lambda node: False)  # count TYPE_CHECKING imports as imports
    return test_imports.cycles()


def test_the_scan_counts_type_checking_imports(typed_cycles):
    # Guards the monkeypatch: with TYPE_CHECKING imports counted, the scan sees at least what it sees without them.
    assert set(test_imports.cycles()) <= set(typed_cycles)


@pytest.mark.parametrize("module", UNTANGLED)
def test_the_module_is_in_no_import_cycle(module, typed_cycles):
    assert [sorted(c) for c in typed_cycles if module in c] == []


def test_the_simulated_agents_import_on_their_own_and_answer_once_the_environments_are_imported():
    code = ("import faultlens.injectors.sim as sim\n"
            "assert sim.SIM_PREFIX == 'faultlens-sim'\n"
            "from faultlens.injectors import envs\n"
            "print(type(sim.policy_for('table_qa')).__name__ == type(envs.get('table_qa').policy()).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert out == "True"
