"""The python examples of the README and of docs/*.md run as written (offline).

Each document's examples sit between `<!-- section: NAME -->` and
`<!-- end: NAME -->` markers; a section's python blocks run in order in one
namespace, in a scratch directory, and their printed output is checked.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def section_blocks(doc: Path, name: str) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    section = text[text.index(f"<!-- section: {name} -->") : text.index(f"<!-- end: {name} -->")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def capture_blocks() -> list[str]:
    return section_blocks(DOCS / "capture.md", "capture")


def run_blocks(doc: Path, blocks: list[str]) -> dict:
    namespace: dict = {}
    tracers = []
    try:
        for block in blocks:
            exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 - running our own documentation
            if "tracer" in namespace and namespace["tracer"] not in tracers:
                tracers.append(namespace["tracer"])
    finally:
        for tracer in tracers:
            if hasattr(tracer, "shutdown"):
                tracer.shutdown()
    return namespace


@pytest.fixture
def in_repo_copy(tmp_path, monkeypatch):
    """A scratch directory in which the examples' relative paths (tests/..., runs/...) resolve."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 300
    assert "make demo" in text and "make test" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), link


def test_docs_links_and_images_resolve():
    for doc in DOCS.glob("*.md"):
        for link in re.findall(r"\]\(([^)#:]+)\)", doc.read_text(encoding="utf-8")):
            assert (doc.parent / link).exists(), f"{doc.name}: {link}"


def test_every_python_block_is_in_a_tested_section():
    """A python example outside the markers would not be run by these tests."""
    for doc in [README, *DOCS.glob("*.md")]:
        text = doc.read_text(encoding="utf-8")
        outside = re.sub(r"<!-- section: (\w+) -->.*?<!-- end: \1 -->", "", text, flags=re.S)
        assert "```python" not in outside, doc.name


def test_readme_quickstart_runs(in_repo_copy, capsys):
    run_blocks(README, section_blocks(README, "quickstart"))
    out = capsys.readouterr().out.splitlines()
    # step 1 is the worker's own step: the agent span whose code made the call (the tool step
    # is evidence about it, see middleware/model/roles.py)
    assert out[0] == "worker 1 A.2"
    assert out[1].startswith("Copy tool arguments exactly")


def test_capture_section_has_examples():
    assert len(capture_blocks()) >= 4


@pytest.mark.slow
def test_capture_examples_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run_blocks(DOCS / "capture.md", capture_blocks())
    out = capsys.readouterr().out
    assert "[(0, 'researcher', 'tool_call'), (1, 'researcher', 'llm_call'), (2, 'researcher', 'message'), (3, 'researcher', 'final_answer')]" in out
    assert "[('answerer', '{\"answer\": \"HELLO\"}')]" in out
    assert (tmp_path / "trace.otlp.json").exists()
    # from any framework: OpenInference spans sent span by span to the server
    assert "Weather in Paris? ['Triage', 'Weather Specialist'] [('Triage', 'Handing over.'), ('Weather Specialist', 'Sunny, 21C')]" in out


def test_attribute_example_runs(in_repo_copy, capsys):
    run_blocks(DOCS / "attribute.md", section_blocks(DOCS / "attribute.md", "attribute"))
    assert capsys.readouterr().out.strip() == "searcher 2 A.2 ['answer_origin', 'near_miss']"


@pytest.mark.slow
def test_inject_example_runs(in_repo_copy, capsys):
    namespace = run_blocks(DOCS / "inject.md", section_blocks(DOCS / "inject.md", "inject"))
    trace = namespace["trace"]
    assert trace.gold is not None and 0 <= trace.gold.step < len(trace.steps)
    assert "kept;" in capsys.readouterr().out


@pytest.mark.slow
def test_benchmark_example_runs(in_repo_copy, capsys):
    namespace = run_blocks(DOCS / "benchmark.md", section_blocks(DOCS / "benchmark.md", "benchmark"))
    accuracy = namespace["report"]["runs"][0]["metrics"]["overall"]["step_accuracy"]
    assert capsys.readouterr().out.strip().endswith(str(accuracy))
    assert (in_repo_copy / "runs" / "whowhen-heuristic" / "predictions.jsonl").exists()


@pytest.mark.slow
def test_feedback_examples_run(in_repo_copy, capsys):
    namespace = run_blocks(DOCS / "feedback.md", section_blocks(DOCS / "feedback.md", "feedback"))
    out = capsys.readouterr().out
    assert "analyst R.3 | Recompute every number from its inputs" in out
    lesson_ids = [step.lessons for step in namespace["store"].get_trace(namespace["run"].id).steps]
    assert lesson_ids and all(len(ids) == 1 for ids in lesson_ids)
    assert "Recompute every number before passing it on." in namespace["graph"].compile().invoke({"question": "How much larger was the revenue of Brisk Corp than Quell Ltd in 2021?"})["prompt"]


def test_scale_out_example_runs_on_postgres(pg_url):
    """The scale-out doc's example, with its URL pointed at the test server."""
    (block,) = section_blocks(DOCS / "scale-out.md", "scaleout")
    # Not run_blocks: it shuts the tracer down after the block, and a shut-down
    # tracer's batch processor drops what it is given (OpenTelemetry's rule).
    namespace: dict = {}
    exec(compile(block.replace("postgresql://faultlens@db.internal/faultlens", pg_url), str(DOCS / "scale-out.md"), "exec"), namespace)  # noqa: S102
    assert type(namespace["store"]).__name__ == "PostgresStore"
    try:
        with namespace["tracer"].run(task="scale out") as run:
            namespace["tracer"].final_answer("ok", agent="a")
    finally:
        namespace["tracer"].shutdown()
    assert namespace["store"].get_trace(run.id).steps[0].content == "ok"


def test_framework_instrumentation_snippet_runs():
    """docs/capture-frameworks.md's set-up, with the smolagents instrumentation (the `frameworks` extra)."""
    instrumentation = pytest.importorskip("openinference.instrumentation.smolagents")
    (block,) = section_blocks(DOCS / "capture-frameworks.md", "frameworks")
    namespace = run_blocks(DOCS / "capture-frameworks.md", [block])
    try:
        assert instrumentation.SmolagentsInstrumentor().is_instrumented_by_opentelemetry
    finally:
        instrumentation.SmolagentsInstrumentor().uninstrument()
        namespace["provider"].shutdown()
