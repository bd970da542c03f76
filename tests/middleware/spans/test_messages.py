"""Values and messages out of span attributes."""

import json

from faultlens.middleware.spans.messages import maybe_json


# -- maybe_json reads exactly what json.loads reads (issue #17: it skips json.loads' whitespace scans) --
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _maybe_json_with_loads(value):
    import re

    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("null", "true", "false") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text or "x"):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return value
    return value


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.text(max_size=20),
    st.lists(st.sampled_from(['{', '}', '[', ']', '"', ':', ',', ' ', '\t', '\n', '\xa0', '1', '-', 'e', '.', 'a', 'null', 'true', 'NaN', '\\', '\ufeff']), max_size=16).map("".join),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3)).map(json.dumps),
))
def test_maybe_json_reads_what_json_loads_reads(text):
    import math

    new, old = maybe_json(text), _maybe_json_with_loads(text)
    assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True) or (isinstance(old, float) and math.isnan(old) and math.isnan(new))
