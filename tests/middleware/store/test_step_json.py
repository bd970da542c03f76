"""The stored step JSON (`step_json.stored_step`) against the serialisation it replaced (issue #17).

The reference below is what every store wrote before: the step dumped by
pydantic in JSON mode, the whole dict walked by `redact`, then
`json.dumps(..., ensure_ascii=False, sort_keys=True)`. The new path must give
the same bytes, the same key, agent and kind columns, for any step.
"""

from __future__ import annotations

import json
import math
import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from faultlens.middleware.model.trace import Media, Step, StepKind, StepRole, Usage
from faultlens.middleware.store.redact import REDACTED, redact, redact_id
from faultlens.middleware.ingest.write import ingest
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.store.step_json import PreparedStep, json_text, stored_step
from faultlens.middleware.store import SQLiteStore


def reference(step: Step) -> PreparedStep:
    """What `store_api.prepare_steps` wrote before `step_json` (main at 8fe102e)."""
    data = redact(step.model_dump(mode="json"))
    key = redact_id(step.span_id) if step.span_id else f"#{step.index}"
    return PreparedStep(key, step.started_at, data["agent"], data["kind"], int(step.error is not None), json.dumps(data, ensure_ascii=False, sort_keys=True))


SECRETS = [
    "sk-proj-abcd1234efgh", "AKIAIOSFODNN7EXAMPLE", "password=hunter22", "Bearer abc.def.ghi", "ghp_" + "a1B2" * 9,
    "https://user:pa55word@example.com/x", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "token: xyz123", "eyJhbGciOi.eyJzdWIi.sig",
]
HEX_IDS = ["0af7651916cd43dd", "4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331"]
text = st.one_of(
    st.text(max_size=24),
    st.sampled_from(SECRETS + HEX_IDS + ["", "worker", "echo", "tool_call", "é ü 中文", "a\"quote\\back\nline\u2028"]),
    st.builds(lambda a, s, b: a + " " + s + " " + b, st.text(max_size=8), st.sampled_from(SECRETS), st.text(max_size=8)),
)
keys = st.one_of(st.text(max_size=10), st.sampled_from(["id", "name", "data", "agent", "span_id", "api_key", "password", "input_tokens", "max_tokens", "note", "sk-proj-abcd1234efgh", "token"]))
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), floats, text)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.integers(0, 9), inner, max_size=2),
    ),
    max_leaves=12,
)
media = st.builds(
    lambda mime, where, value, frame, ts, caption: Media(mime_type=mime, frame_index=frame, timestamp_s=ts, caption=caption, **{where: value}),
    text, st.sampled_from(["path", "uri", "data"]), st.one_of(text, st.just("QUJD" * 20)), st.none() | st.integers(0, 99), st.none() | floats, st.none() | text,
)
usage = st.builds(Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6), cost_usd=floats)
steps = st.builds(
    Step,
    index=st.integers(0, 10**6),
    agent=text,
    kind=st.sampled_from(list(StepKind)),
    role=st.sampled_from(list(StepRole)),
    content=text,
    media=st.lists(media, max_size=2),
    tool_name=st.none() | text,
    tool_arguments=values,
    tool_result=values,
    error=st.none() | text,
    model=st.none() | text,
    native_id=st.none() | text,
    span_id=st.none() | text,
    parent_span_id=st.none() | text,
    started_at=st.none() | floats | st.integers(-(10**12), 10**12),
    ended_at=st.none() | floats,
    usage=st.none() | usage,
    lessons=st.lists(text, max_size=3),
    metadata=st.dictionaries(keys, values, max_size=4),
)


def same(a: PreparedStep, b: PreparedStep) -> bool:
    """Equal, counting a NaN start time as equal to itself."""
    nan = a.started_at is not None and b.started_at is not None and math.isnan(a.started_at) and math.isnan(b.started_at)
    return a._replace(started_at=None) == b._replace(started_at=None) and (nan or a.started_at == b.started_at)


@settings(max_examples=600, deadline=None)
@given(steps)
def test_the_stored_json_is_byte_identical_to_the_dump_redact_dumps_path(step):
    new, old = stored_step(step), reference(step)
    assert new.data == old.data
    assert same(new, old)


def test_secrets_in_every_kind_of_field_are_redacted_as_before():
    step = Step(
        index=3, agent="sk-proj-abcd1234efgh", content="use password=hunter22 now", tool_name="Bearer abcdef", error="token: xyz123",
        tool_arguments={"api_key": "plain", "nested": ("sk-proj-abcd1234efgh", 1.5), "id": "AKIAIOSFODNN7EXAMPLE"},
        tool_result=["ghp_" + "a1B2" * 9, float("nan")], span_id="AKIAIOSFODNN7EXAMPLE", lessons=["password=hunter22"],
        metadata={"password": "x", "note": "https://user:pa55word@example.com/"}, usage=Usage(input_tokens=3, cost_usd=float("inf")),
    )
    new = stored_step(step)
    assert new == reference(step)
    for secret in ("abcd1234efgh", "hunter22", "xyz123", "AKIAIOSFODNN7EXAMPLE", "a1B2a1B2", "pa55word"):
        assert secret not in new.data
    data = json.loads(new.data)
    assert data["tool_arguments"]["api_key"] == REDACTED and data["tool_result"][1] is None and data["usage"]["cost_usd"] is None
    assert new.key == data["span_id"] == redact_id("AKIAIOSFODNN7EXAMPLE") and new.key.startswith("redacted-")


def test_ingested_spans_are_stored_as_the_reference_serialises_their_steps(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.agent.name": "worker",
             "gen_ai.tool.call.arguments": json.dumps({"q": "password=hunter22", "n": 1}), "gen_ai.tool.call.result": '{"i": 5}',
             "gen_ai.conversation.id": "run-1", "faultlens.metadata": json.dumps({"k": [1, 2.5, None]})}
    records = [SpanRecord("a" * 32, f"{i:016x}", None, "execute_tool echo", 10**18 + i, 10**18 + i + 5, dict(attrs)) for i in range(1, 4)]
    ingest(store, records, source="test")
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("SELECT key, data FROM steps ORDER BY seq").fetchall()
    trace = store.get_trace("run-1")
    assert [r[0] for r in rows] == [f"{i:016x}" for i in range(1, 4)]
    for (key, data), step in zip(rows, trace.steps):
        assert "hunter22" not in data
        assert data == reference(step.model_copy(update={"index": 0})).data


@settings(max_examples=400, deadline=None)
@given(values)
def test_json_text_is_json_dumps_sorted_with_str_for_the_unknown(value):
    assert json_text(value) == json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


# -- the span path: what ingest stores without building a Step is what the Step would store --------
from faultlens.middleware.spans import conventions as S  # noqa: E402
from faultlens.middleware.spans.mapping import span_to_step, step_fields  # noqa: E402
from faultlens.middleware.errors import InputError  # noqa: E402
from faultlens.middleware.store.step_json import stored_fields  # noqa: E402

json_texts = st.one_of(
    st.builds(json.dumps, values.filter(lambda v: not isinstance(v, dict) or all(isinstance(k, str) for k in v))),
    st.sampled_from(['{"i": 5}', "[1, 2]", '{"args": ["5"], "kwargs": {}}', "{not json", '"quoted"', "null", "42", "[NaN]", '{"a": 1e999}']),
)
attribute_values = st.one_of(text, json_texts, st.integers(), floats, st.booleans(), st.tuples(text, text), st.binary(max_size=4), st.none())
span_attributes = st.fixed_dictionaries(
    {},
    optional={
        S.OPERATION: st.sampled_from(["execute_tool", "chat", "invoke_agent", "invoke_workflow", "embeddings", "bogus"]),
        S.OI_KIND: st.sampled_from(["TOOL", "LLM", "AGENT", "CHAIN", "RETRIEVER"]),
        S.STEP_KIND: st.sampled_from([k.value for k in StepKind] + ["no-such-kind"]),
        S.STEP_ROLE: st.sampled_from([r.value for r in StepRole] + ["no-such-role"]),
        S.AGENT_NAME: text,
        S.TOOL_NAME: attribute_values,
        S.TOOL_ARGUMENTS: attribute_values,
        S.TOOL_RESULT: attribute_values,
        S.CONTENT: attribute_values,
        S.STEP_METADATA: st.one_of(json_texts, st.dictionaries(st.integers(0, 3) | text, values, max_size=2)),
        S.ORIGINAL_SPAN_ID: attribute_values,
        S.ORIGINAL_PARENT_ID: attribute_values,
        S.NO_START: st.booleans(),
        S.LESSONS: st.one_of(st.tuples(text), json_texts),
        S.NATIVE_ID: attribute_values,
        S.REQUEST_MODEL: attribute_values,
        S.INPUT_TOKENS: attribute_values,
        S.COST_USD: attribute_values,
        S.OUTPUT_MESSAGES: json_texts,
        "output.value": attribute_values,
        "input.value": attribute_values,
        "tool.parameters": json_texts,
    },
)
records = st.builds(
    lambda attrs, status, message, name, parent: SpanRecord(
        "c" * 32, "0af7651916cd43dd", parent, name, 1_700_000_000_000_000_000, 1_700_000_000_500_000_000, attrs, status=status, status_message=message
    ),
    span_attributes, st.sampled_from(["unset", "ok", "error"]), st.none() | text | st.integers(), st.sampled_from(["execute_tool echo", "chat m", "Step 1", "x.run"]),
    st.none() | st.just("b7ad6b7169203331"),
)


@settings(max_examples=600, deadline=None)
@given(records)
def test_a_span_is_stored_as_its_step_would_be_or_refused_with_the_same_error(record):
    try:
        step = span_to_step(record, source="t")
    except InputError as exc:
        try:
            step_fields(record, source="t")
        except InputError as again:
            assert str(again) == str(exc)
            return
        raise AssertionError(f"step_fields took a span span_to_step refuses: {exc}") from None
    fields = step_fields(record, source="t")
    if step is None:
        assert fields is None
        return
    assert stored_or_refused(lambda: stored_fields(fields)) == stored_or_refused(lambda: stored_step(step)) == stored_or_refused(lambda: reference(step))


def stored_or_refused(prepare) -> PreparedStep | type:
    # Bytes that are not UTF-8 (only a Python caller can put them on a span: OTLP gives base64 text)
    # cannot be written as JSON: pydantic's dump and the new path both refuse them with a ValueError.
    try:
        return prepare()
    except ValueError:
        return ValueError


def test_the_template_matches_the_step_model_and_redaction():
    """`stored_fields` writes a fixed template of the Step's fields; it is right only while this holds."""
    from faultlens.middleware.store.redact import ID_KEYS, is_secret_key, redact_text
    from faultlens.middleware.store.step_json import _ID_FIELDS, _TEMPLATE_FIELDS

    fields = set(Step.model_fields)
    assert fields == set(_TEMPLATE_FIELDS)
    assert list(_TEMPLATE_FIELDS) == sorted(_TEMPLATE_FIELDS)
    assert {k for k in fields if k in ID_KEYS} == set(_ID_FIELDS)
    assert not any(redact_text(k) != k or is_secret_key(k) for k in fields)
    assert not any(redact_text(v.value) != v.value for v in (*StepKind, *StepRole))
