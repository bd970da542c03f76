"""The span-mapping core names no framework: what a framework does its own way is in its adapter (`spans/adapters/<framework>.py`)."""

import re
from pathlib import Path

import pytest

MIDDLEWARE = Path(__file__).resolve().parents[3] / "middleware"
# Everything of the mapping and ingest but the framework adapters themselves (the registry included).
CORE = sorted([*(MIDDLEWARE / "spans").glob("*.py"), MIDDLEWARE / "spans" / "adapters" / "__init__.py", *(MIDDLEWARE / "ingest").glob("*.py")])
# Framework names as code, comments and docs write them (`openai-agents`, `OpenAI Agents`, `MagenticOneGroupChat`, `llama_index`, ...):
# a name may run on into an identifier; the short ones that are English words' prefixes must stand alone.
FRAMEWORKS = ["ag2", "autogen", "smolagents", "openai[ _-]?agents", "magentic", "crewai", "llama[ _-]?index", "langgraph", "langchain",
              "haystack", "semantic[ _-]?kernel", "pydantic[ _-]?ai"]
STANDALONE = ["dspy", "agno", "letta", "strands"]
PATTERN = re.compile(r"(?<![a-z])(" + "|".join(FRAMEWORKS) + r")|\b(" + "|".join(STANDALONE) + r")\b", re.IGNORECASE)


def test_the_scan_reads_the_core():
    names = {path.relative_to(MIDDLEWARE).as_posix() for path in CORE}
    assert {"spans/conventions.py", "spans/messages.py", "spans/mapping.py", "spans/tree.py", "spans/adapters/__init__.py", "ingest/plan.py", "ingest/write.py"} <= names
    assert not any(name.startswith("spans/adapters/") and name != "spans/adapters/__init__.py" for name in names)


def test_the_pattern_finds_framework_names():
    for text in ["AG2_RECIPIENT", "# smolagents' Step N", "openai-agents", "OpenAI Agents SDK", "MagenticOneGroupChat", "llama_index", "AutoGen"]:
        assert PATTERN.search(text), text
    assert not PATTERN.search("an agent span, agents, the agent's name, agnostic, a lettable rag2")


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.relative_to(MIDDLEWARE).as_posix())
def test_no_framework_name_in_the_core(path):
    found = [f"{path.name}:{n}: {line.strip()}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if PATTERN.search(line)]
    assert found == [], "move it to the framework's adapter (spans/adapters/)"
