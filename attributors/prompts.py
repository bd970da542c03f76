"""Prompts and answer models of the LLM attribution methods.

Each method has its own prompt, versioned (`PROMPT_VERSIONS`), so stored
attributions say which wording produced them. The answer models are pydantic:
their JSON schema is what the model is asked to fill in.
"""

from __future__ import annotations

from typing import Literal

from collections.abc import Iterable

from pydantic import BaseModel, Field, JsonValue

from faultlens.middleware.model.taxonomy import CATEGORIES, MODES, taxonomy_text

PROMPT_VERSIONS = {
    "all_at_once": "all_at_once/v1",
    "step_by_step": "step_by_step/v1",
    "binary_search": "binary_search/v1",
    "hybrid": "hybrid/v1",
}

# A schema-enforcing backend stops a reason at this length, so a small model
# cannot ramble inside the string until max_tokens cuts the JSON short. It is
# a schema hint only: a longer reason from a provider that ignores it is kept.
REASON_MAX_CHARS = 300
_SHORT: dict[str, JsonValue] = {"maxLength": REASON_MAX_CHARS}

# Below this context size the taxonomy is listed by code and name only, so a
# small local model still has room for the trace.
FULL_TAXONOMY_MIN_TOKENS = 8192


# ---------------------------------------------------------------- answers


class Verdict(BaseModel):
    """Who, when and why, for the whole trace or one window of it."""

    agent: str = Field(description="name of the agent that made the decisive error, exactly as written in the trace")
    step: int = Field(description="number of the step with the decisive error, as in [step N]")
    mode: str = Field(description="failure mode code from the taxonomy, e.g. R.3")
    reason: str = Field(description="one sentence: what went wrong at that step", json_schema_extra=_SHORT)
    confidence: float | None = Field(default=None, description="0 to 1")


class StepJudgement(BaseModel):
    """Is this one step the decisive error?"""

    decisive: bool = Field(description="true if this step is the decisive error")
    mode: str | None = Field(default=None, description="failure mode code if decisive, else null")
    reason: str = Field(description="one sentence", json_schema_extra=_SHORT)


class HalfChoice(BaseModel):
    """Which half of the candidate range holds the decisive error."""

    half: Literal["first", "second"]
    reason: str = Field(description="one sentence", json_schema_extra=_SHORT)


class StepDiagnosis(BaseModel):
    """Why the step already located is wrong."""

    mode: str = Field(description="failure mode code from the taxonomy, e.g. A.2")
    reason: str = Field(description="one sentence: what went wrong at that step", json_schema_extra=_SHORT)
    confidence: float | None = Field(default=None, description="0 to 1")


# ---------------------------------------------------------------- prompt text


def taxonomy_block(context_tokens: int) -> str:
    if context_tokens >= FULL_TAXONOMY_MIN_TOKENS:
        return taxonomy_text()
    lines = []
    for category in CATEGORIES:
        lines.append(f"{category}: " + "; ".join(f"{m.code} {m.name}" for m in MODES if m.category == category))
    return "\n".join(lines)


_DECISIVE = """The DECISIVE ERROR is the earliest step whose action, had it been done right, would have turned this failed run into a successful one. Blame the step where the \
mistake was MADE, not the later step where it became visible: a search with a misspelt name is the error, not the empty result it returns; an answer that copies a wrong number \
blames the step that first produced that number, unless the copying agent's role was to check it. A tool or environment failure is the error only if nothing the agents did caused \
it."""

_STEPS = """Steps are numbered from 0 as [step N]; each shows the agent that produced it and its kind (message, llm_call, tool_call, tool_result, plan, final_answer, human). Text \
marked "[... N characters cut ...]" was shortened for length."""


def system_prompt(method: str, context_tokens: int) -> str:
    task = {
        "all_at_once": "You read the whole record of a failed multi-step run of LLM agents and name the decisive error: which agent, which step, and which failure mode.",
        "step_by_step": "You read a failed multi-step run of LLM agents one step at a time and judge whether the step under review is the decisive error.",
        "binary_search": "You help locate the decisive error in a failed multi-step run of LLM agents by saying which half of a range of steps contains it.",
        "hybrid": "You find the decisive error in a failed multi-step run of LLM agents: first which agent made it, then which of that agent's steps it is, and its failure mode.",
    }[method]
    return f"""You are a failure analyst for LLM agent systems. {task}

{_DECISIVE}

{_STEPS}

FAILURE MODES (answer with the code):
{taxonomy_block(context_tokens)}

Answer with JSON only."""


def whole_trace_question(first: int, last: int, total: int) -> str:
    scope = "the whole run" if first == 0 and last == total - 1 else f"steps {first} to {last} of a run of {total} steps (other parts of the run are judged separately)"
    return (
        f"You see {scope}. Which step among those shown is the decisive error? "
        f'Give "agent" (the name of the agent of that step), "step" (a number from {first} to {last}), '
        '"mode" (a failure-mode code), "reason" (one sentence) and "confidence" (0 to 1).'
    )


def pick_question(candidates: list[int]) -> str:
    listed = ", ".join(str(c) for c in candidates)
    return (
        f"Each part of the run was examined separately; the candidate decisive errors are steps {listed}, shown above with their context. "
        f'Which ONE of them is the decisive error of the whole run (the earliest real cause)? Give "agent", "step" (one of {listed}), '
        '"mode" (a failure-mode code), "reason" and "confidence".'
    )


def step_question(step: int, agent: str) -> str:
    return (
        f"Look at [step {step}] by {agent}, the last step shown. The steps before it contained no decisive error. "
        f'Is step {step} the decisive error? Give "decisive" (true or false), "mode" (a failure-mode code if true, else null) '
        'and "reason" (one sentence).'
    )


def half_question(lo: int, mid: int, hi: int) -> str:
    return (
        f"The decisive error is one of steps {lo} to {hi}. Is it in the FIRST half (steps {lo} to {mid}) "
        f'or the SECOND half (steps {mid + 1} to {hi})? Give "half" ("first" or "second") and "reason" (one sentence).'
    )


def diagnosis_question(step: int, agent: str) -> str:
    return (
        f"[step {step}] by {agent} has been identified as the decisive error. Which failure mode is it? "
        'Give "mode" (a failure-mode code), "reason" (one sentence: what went wrong) and "confidence" (0 to 1).'
    )


# ---------------------------------------------------------------- per-trace schemas
#
# The schema sent to the model lists the trace's agents, the allowed steps and
# the taxonomy codes as enums, so a provider (or llama.cpp's grammar) that
# enforces schemas can only produce readable answers. Parsing stays with the
# plain field types above, and the checks in `llm_base` still apply, so an
# answer outside the lists is reported as unparsed, never coerced.

_CODES = [m.code for m in MODES]


def _enum(values: Iterable[JsonValue]) -> dict[str, JsonValue]:
    return {"enum": list(values)}


def _steps_constraint(steps: range | list[int]) -> dict[str, JsonValue]:
    # An enum where it is short: llama.cpp's grammar enforces enums but not minimum/maximum.
    if isinstance(steps, range) and len(steps) > 256:
        return {"minimum": steps.start, "maximum": steps.stop - 1}
    return {"enum": list(steps)}


def verdict_model(agents: list[str], steps: range | list[int]) -> type[Verdict]:
    from pydantic import create_model

    return create_model(
        "Verdict",
        __base__=Verdict,
        agent=(str, Field(description=Verdict.model_fields["agent"].description, json_schema_extra=_enum(agents))),
        step=(int, Field(description=Verdict.model_fields["step"].description, json_schema_extra=_steps_constraint(steps))),
        mode=(str, Field(description=Verdict.model_fields["mode"].description, json_schema_extra=_enum(_CODES))),
    )


def judgement_model() -> type[StepJudgement]:
    from pydantic import create_model

    return create_model(
        "StepJudgement",
        __base__=StepJudgement,
        mode=(str | None, Field(default=None, description=StepJudgement.model_fields["mode"].description, json_schema_extra=_enum([*_CODES, None]))),
    )


def diagnosis_model() -> type[StepDiagnosis]:
    from pydantic import create_model

    return create_model(
        "StepDiagnosis",
        __base__=StepDiagnosis,
        mode=(str, Field(description=StepDiagnosis.model_fields["mode"].description, json_schema_extra=_enum(_CODES))),
    )
