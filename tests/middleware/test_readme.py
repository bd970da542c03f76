"""The python examples of the README's capture section run as written (offline)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def capture_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("<!-- section: capture -->") : text.index("<!-- end: capture -->")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_capture_section_has_examples():
    assert len(capture_blocks()) >= 4


@pytest.mark.slow
def test_capture_examples_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    tracers = []
    try:
        for block in capture_blocks():
            exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - running our own documentation
            if "tracer" in namespace:
                tracers.append(namespace["tracer"])
    finally:
        for tracer in tracers:
            tracer.shutdown()
    out = capsys.readouterr().out
    assert "[(0, 'researcher', 'tool_call'), (1, 'researcher', 'llm_call'), (2, 'researcher', 'message'), (3, 'researcher', 'final_answer')]" in out
    assert "[('answerer', '{\"answer\": \"HELLO\"}')]" in out
    assert (tmp_path / "trace.otlp.json").exists()
    # from any framework: OpenInference spans sent span by span to the server
    assert "Weather in Paris? ['Triage', 'Weather Specialist'] [('Triage', 'Handing over.'), ('Weather Specialist', 'Sunny, 21C')]" in out
