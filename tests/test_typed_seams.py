"""Issue 46 item 4: where the parts meet is typed; `Any` in public signatures stays at most half what it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultlens.feedback.loop import LoopResult, Saved
from faultlens.middleware.model.trace import Attribution
from faultlens.server.failed_runs import HoldsAttributions
from faultlens.server.interop import saved_attributions
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
count_any = load_script("count_any")

# Counted before issue 46 item 4 (scripts/count_any.py): 38 of 202 in middleware/store, 29 of 126 in faultlens/server.
BEFORE = {"middleware/store": 38, "faultlens/server": 29}


@pytest.mark.parametrize("folder", sorted(BEFORE))
def test_any_in_public_signatures_is_halved_or_better(folder):
    with_any = [s.name for s in count_any.count(ROOT / folder) if s.has_any]
    assert len(with_any) <= BEFORE[folder] // 2, with_any


def test_the_count_sees_parameters_returns_fields_and_quoted_annotations_and_skips_private_names(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import Any\n"
        "import typing\n"
        "def takes(x: Any) -> int: ...\n"
        "def gives() -> dict[str, typing.Any]: ...\n"
        "def quoted(x: 'list[Any]') -> None: ...\n"
        "def clean(x: object) -> str: ...\n"
        "def _private(x: Any) -> Any: ...\n"
        "class Row:\n"
        "    value: Any\n"
        "    def __init__(self, x: Any) -> None:\n"
        "        def nested(y: Any) -> Any: ...\n"
        "    def _hidden(self) -> Any: ...\n"
        "class _Private:\n"
        "    def shown(self) -> Any: ...\n"
    )
    found = {s.name: s.has_any for s in count_any.signatures(source)}
    assert found == {"takes": True, "gives": True, "quoted": True, "clean": False, "Row": True, "Row.__init__": True}


def _attribution(step: int) -> Attribution:
    return Attribution(trace_id="t", method="m", step=step)


def test_what_on_failure_saved_is_read_by_its_type():
    one, two = _attribution(1), _attribution(2)
    assert saved_attributions(None) == []
    assert saved_attributions(one) == [one]
    assert saved_attributions([one, two]) == [one, two]
    assert saved_attributions(Saved(one, [])) == [one]  # a named tuple, read by what it holds, not as a sequence
    assert saved_attributions(Saved(None, [])) == []
    assert saved_attributions(LoopResult("t", two, None)) == [two]
    assert isinstance(LoopResult("t", None, None), HoldsAttributions)


def test_an_on_failure_that_returns_something_else_is_told_so():
    with pytest.raises(TypeError, match="on_failure returned str"):
        saved_attributions("not saved")  # the wrong type is the point of the test
