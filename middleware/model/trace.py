"""The trace data model: what every part of faultlens reads and writes.

A `Trace` is one run of an agent system on one task: its ordered `Step`s, the
agents that produced them, the outcome, where it came from, and (for benchmark
traces) the gold label. `Attribution` is what an attributor says about a failed
trace; `Lesson` is what the feedback loop learns from an attribution.

All models are pydantic v2 and round-trip exactly through JSON.
"""

from __future__ import annotations

import time
import uuid
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer, model_validator

from ..errors import NotFound

# Steps gained a `role` within schema "1": it is written only where it differs
# from the role the step's kind implies, so data without it reads unchanged.
SCHEMA_VERSION = "1"

Modality = Literal["text", "image", "video"]


def new_id() -> str:
    return uuid.uuid4().hex


class _Model(BaseModel):
    # extra="forbid" so a misspelled field in an imported file is an error
    # naming that field, not a silently dropped value.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Media(_Model):
    """An image, a video frame or a clip attached to a step or a task.

    Exactly one of `path`, `uri` or `data` (base64) holds the content.
    """

    mime_type: str
    path: str | None = None
    uri: str | None = None
    data: str | None = Field(default=None, description="base64-encoded bytes")
    frame_index: int | None = None
    timestamp_s: float | None = None
    caption: str | None = None

    @model_validator(mode="after")
    def _one_location(self) -> Media:
        given = [n for n in ("path", "uri", "data") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"media needs exactly one of path, uri or data (got {given or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return self.mime_type.split("/", 1)[0]

    def describe(self) -> str:
        where = self.path or self.uri or f"inline {len(self.data or '') * 3 // 4} bytes"
        frame = f" frame {self.frame_index}" if self.frame_index is not None else ""
        return f"{self.mime_type}{frame}: {where}"


class AgentInfo(_Model):
    name: str
    role: str = ""
    description: str = ""


class Task(_Model):
    query: str
    id: str | None = None
    reference_answer: str | None = None
    options: list[str] | None = None
    attachments: list[Media] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Outcome(_Model):
    success: bool
    score: float | None = None
    evaluator: str | None = None
    detail: str | None = None


class Source(_Model):
    framework: str = "python"
    benchmark: str | None = None
    modality: Modality = "text"
    format: str = "faultlens"
    native_id: str | None = None
    subset: str | None = None


class GoldLabel(_Model):
    """The decisive error: who (agent), when (step index), why (mode + reason)."""

    step: int = Field(ge=0)
    agent: str | None = None
    mode: str | None = None
    reason: str | None = None
    native_step: str | None = None


class StepKind(str, Enum):
    message = "message"
    llm_call = "llm_call"
    tool_call = "tool_call"
    tool_result = "tool_result"
    plan = "plan"
    final_answer = "final_answer"
    human = "human"


class StepRole(str, Enum):
    """What a step is in the run, which decides whether it can be the decisive error.

    An attributor blames *decisions*. A tool's result or a code executor's
    output is evidence about the decision that caused it (the call, the code),
    not a candidate itself, unless the tool failed on a correct call (an
    environment fault, V.3). Control steps (system prompts, termination
    checks, bookkeeping) are context.
    """

    decision = "decision"  # an agent's own message, plan, call, code or answer; also a simulated user's turn
    tool_result = "tool_result"  # what a tool or the environment returned
    executor_output = "executor_output"  # a code executor / terminal participant's output (Computer_terminal, ...)
    control = "control"  # system prompts, termination checks, orchestration bookkeeping


def default_role(kind: StepKind | str | None) -> StepRole:
    """The role a step has when its source did not say: tool results are evidence, all else a decision."""
    return StepRole.tool_result if kind in (StepKind.tool_result, StepKind.tool_result.value) else StepRole.decision


class Usage(_Model):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class Step(_Model):
    """One action of one agent. `index` is the unit of *when* (0-based)."""

    index: int = Field(ge=0)
    agent: str
    kind: StepKind = StepKind.message
    role: StepRole = StepRole.decision
    content: str = ""
    media: list[Media] = Field(default_factory=list)
    tool_name: str | None = None
    tool_arguments: Any = None
    tool_result: Any = None
    error: str | None = None
    model: str | None = None
    native_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    usage: Usage | None = None
    lessons: list[str] = Field(default_factory=list, description="ids of lessons shown to the agent")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _role_from_kind(cls, data: Any) -> Any:
        # Data written before steps had a role (schema 1) gets the role its kind implies.
        if isinstance(data, dict) and data.get("role") is None:
            data = {**data, "role": default_role(data.get("kind"))}
        return data

    @model_serializer(mode="wrap")
    def _role_when_needed(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict) and self.role == default_role(self.kind):
            data.pop("role", None)  # implied by the kind: old data and new stay byte-identical
        return data

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def is_decision(self) -> bool:
        return self.role == StepRole.decision


class Trace(_Model):
    id: str = Field(default_factory=new_id)
    schema_version: str = SCHEMA_VERSION
    task: Task
    agents: list[AgentInfo] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    outcome: Outcome | None = None
    source: Source = Field(default_factory=Source)
    gold: GoldLabel | None = None
    created_at: float = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Trace:
        for position, step in enumerate(self.steps):
            if step.index != position:
                raise ValueError(f"steps[{position}].index is {step.index}; steps must be numbered 0..n-1 in order")
        if self.gold is not None and self.steps and self.gold.step >= len(self.steps):
            raise ValueError(f"gold.step {self.gold.step} is outside the trace's {len(self.steps)} steps")
        known = {a.name for a in self.agents}
        for step in self.steps:
            if step.agent not in known:
                self.agents.append(AgentInfo(name=step.agent))
                known.add(step.agent)
        return self

    @property
    def failed(self) -> bool:
        return self.outcome is not None and not self.outcome.success

    @property
    def agent_names(self) -> list[str]:
        return [a.name for a in self.agents]

    @property
    def multi_agent(self) -> bool:
        return len({s.agent for s in self.steps}) > 1

    def step_of(self, native_id: str) -> Step:
        for step in self.steps:
            if step.native_id == native_id:
                return step
        raise NotFound(f"trace {self.id} has no step with native id {native_id!r}")


class AttributionStatus(str, Enum):
    ok = "ok"
    unparsed = "unparsed"  # the method answered but the answer could not be read
    error = "error"  # the method failed (model error, budget exhausted, ...)


class Cost(_Model):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0
    reruns: int = Field(default=0, description="times the agents were re-run (counterfactual trials)")

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            usd=self.usd + other.usd,
            seconds=self.seconds + other.seconds,
            reruns=self.reruns + other.reruns,
        )


class Candidate(_Model):
    step: int
    score: float
    agent: str | None = None
    reason: str | None = None


class Attribution(_Model):
    id: str = Field(default_factory=new_id)
    trace_id: str
    method: str
    status: AttributionStatus = AttributionStatus.ok
    agent: str | None = None
    step: int | None = None
    mode: str | None = None
    reason: str | None = None
    confidence: float | None = None
    ranking: list[Candidate] = Field(default_factory=list)
    cost: Cost = Field(default_factory=Cost)
    model: str | None = None
    backend: str | None = Field(default=None, description="what produced the answer, e.g. litellm, heuristic, local")
    prompt_version: str | None = None
    raw: list[str] = Field(default_factory=list, description="raw model answers, kept for audit")
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)


class Lesson(_Model):
    id: str = Field(default_factory=new_id)
    agent: str
    mode: str | None = None
    situation: str = Field(description="when the lesson applies")
    mistake: str = Field(description="what went wrong")
    advice: str = Field(description="what to do instead")
    trace_id: str | None = None
    step: int | None = None
    attribution_id: str | None = None
    method: str | None = Field(default=None, description="what produced the lesson (reflection method)")
    shown: int = 0
    helped: int = Field(default=0, description="runs it was shown in that succeeded")
    failed: int = Field(default=0, description="runs it was shown in that failed")
    retired: bool = False
    merged: int = Field(default=0, description="near-duplicate lessons merged into this one (agreement votes)")
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
