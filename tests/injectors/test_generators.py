"""Error generators: every mode yields natural-looking actions that never announce themselves."""

import random

import pytest

from faultlens.injectors import envs
from faultlens.injectors.generators import LLMGenerator, TemplateGenerator, announces, gen_input, perturb_number
from faultlens.injectors.pipeline import choose_pairs
from faultlens.injectors.applicability import BY_CODE, MODES, applicable

from .conftest import ENVS


def test_announces_detects_markers_but_not_ones_already_there():
    assert announces("Answer: 42 (this is the wrong value)")
    assert announces("Action: search\nVelmora mayor  # injected")
    assert not announces("Answer: 42")
    assert not announces("Traceback ... OperationalError: no such column", "Traceback ... OperationalError: x")


@pytest.mark.parametrize("name", ENVS)
def test_generated_actions_do_not_announce_themselves(seed_runs, name):
    env = envs.get(name)
    generator = TemplateGenerator()
    produced = {}
    for _, seed in seed_runs[name]:
        for t, mode in choose_pairs(seed.trace, random.Random(0), rotate=0):
            out = generator.generate(gen_input(seed.trace, t, mode, random.Random(t), env))
            if out is None:
                continue
            produced[mode] = produced.get(mode, 0) + 1
            original = seed.trace.steps[t].content
            assert out.text != original
            assert not announces(out.text, original), (mode, out.text)
            assert not announces(out.reason.replace("wrong", ""), "")  # reasons are plain sentences too
    # the environment's steps give the generators something to do for many modes
    assert len(produced) >= 10, produced


def test_applicability_follows_the_taxonomy(seed_runs):
    _, seed = seed_runs["research_team"][0]
    trace = seed.trace
    for step in trace.steps:
        for mode in MODES:
            if applicable(mode, step, trace):
                assert step.kind in mode.applies_to
                if mode.needs == "tool":
                    assert step.tool_name is not None
                assert mode.needs != "media"  # text environment: no perception modes
    _, single = seed_runs["table_qa"][0]
    assert not any(applicable(BY_CODE["C.2"], s, single.trace) for s in single.trace.steps)


def test_perturbed_numbers_stay_plausible():
    rng = random.Random(0)
    for token in ["12,500", "2023", "7", "45.10", "1250"]:
        for _ in range(20):
            new = perturb_number(token, rng)
            assert new != token and new.replace(",", "").replace(".", "").isdigit()


def test_llm_generator_through_litellm_mock(seed_runs):
    """The LLM generator's call goes through litellm (mock_response: a test double, no network)."""
    env = envs.get("table_qa")
    _, seed = seed_runs["table_qa"][0]
    t = len(seed.trace.steps) - 1
    inp = gen_input(seed.trace, t, "R.3", random.Random(0), env)
    gen = LLMGenerator("openai/gpt-4o-mini", mock_response="The query matched 3 rows.\nAnswer: 999")
    prompt = gen.prompt(inp)
    assert BY_CODE["R.3"].definition in prompt and seed.trace.task.query in prompt
    out = gen.generate(inp)
    assert out is not None and out.text.endswith("Answer: 999")
    # an answer that announces itself is not used; the raw text is kept
    bad = LLMGenerator("openai/gpt-4o-mini", mock_response="Answer: 999 (deliberately wrong)")
    assert bad.generate(inp) is None and bad.unparsed == ["Answer: 999 (deliberately wrong)"]
    # a tool call rewritten into something that is no longer an action is not used either
    tool_t = next(s.index for s in seed.trace.steps if s.tool_name and s.kind.value == "tool_call")
    assert LLMGenerator("openai/gpt-4o-mini", mock_response="print(1)").generate(
        gen_input(seed.trace, tool_t, "A.2", random.Random(0), env)) is None
