"""Make your own litellm or LangGraph agent re-runnable, so `counterfactual` can verify who failed.

    from faultlens.middleware.replay.rerunnable import LitellmRerunner

    desk = LitellmRerunner("my-desk", judge=lambda task, answer: answer == expected[task])

    @desk.agent                         # your run(task) -> answer; register_rerunner(desk) is done for you
    def solve(task: str) -> str:
        plan = desk.completion(agent="planner", model=MODEL, messages=[...])   # instead of litellm.completion
        price = lookup("pear")                                                 # a @desk.tool function
        ...
        return answer

    trace = desk.record("What do 3 pears cost?")     # a live run: a Trace with its outcome and its recording
    get("counterfactual").attribute(trace)           # re-runs it with one step regenerated at a time

What it does:

- `desk.completion(...)` takes litellm's arguments (plus `agent=`, who is
  asking) and returns litellm's `ModelResponse`; `@desk.tool` wraps a tool.
  Inside `desk.record` and `desk.rerun` each call goes through a
  `middleware.replay.session.Session`, so it is recorded, and becomes one step of the
  trace (step i is call i). Outside them both are plain calls.
- `desk.record(task)` runs `run(task)` live, judges the answer with
  `judge(task, answer)` (a bool or an `Outcome`) and returns the `Trace`, whose
  `metadata["recording"]` holds every call's request (secrets such as
  `api_key` redacted; the call itself gets them) and response, so the run can
  be re-run later from a store. A run that raises is a failed run.
- `desk.rerun(trace, t, replacement)` (what `counterfactual` calls) replays
  calls 0..t-1 from the recording (no model or tool is called, and a program
  that asks something else raises `Drift`: the trace is `NotRerunnable`),
  regenerates call t, continues live (a later call whose request did not change
  gets its recorded answer) and judges the new answer. Call t is regenerated
  by re-sampling the model at `resample_temperature` (default 1.0: a model
  asked again at temperature 0 mostly says the same thing), or is given
  `replacement` (a `corrector` model's text). A re-sampled tool call is run
  again.

Your program must make its calls in the same order when it is given the same
answers (LangGraph nodes that run one after another do; nodes that call models
in parallel do not). The judge decides every rerun, so it must know the right
answer without the trace (the trace's task may have its reference hidden).
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import FaultlensError
from ..model.trace import AgentInfo, Outcome, Source, Step, StepKind, Task, Trace, new_id
from ..store.redact import redact
from .session import CallRecord, Drift, Recording, Session
from .rerunners import REGENERATED_KEPT, NotRerunnable, Trial, register_rerunner

__all__ = ["LitellmRerunner"]

F = TypeVar("F", bound=Callable[..., Any])
Judge = Callable[[str, Any], "bool | Outcome"]


@dataclass
class _Active:
    """The session of the run being recorded or re-run, the steps it produced so far, and the call being made."""

    session: Session
    steps: list[Step] = field(default_factory=list)
    call: dict[str, Any] = field(default_factory=dict)  # the litellm arguments as given (keys, objects and all)


def _message_dict(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"content": getattr(message, "content", None) or ""}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in tool_calls]
    return out


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class LitellmRerunner:
    """A rerunner for your own agent program (see the module docstring).

    Args:
        name: the rerunner's name; traces it records have `source.benchmark == name`.
        judge: `judge(task, answer)` → whether the answer is right (a bool or an `Outcome`).
        run: your `run(task) -> answer`; or decorate it with `@rerunner.agent`.
        resample_temperature: the temperature at which a step is re-sampled (None: the recorded call's own).
        register: add this rerunner to the registry (`middleware.replay.rerunners.register_rerunner`) so that
            `counterfactual` finds it.
    """

    def __init__(self, name: str, judge: Judge, run: Callable[[str], Any] | None = None, *,
                 resample_temperature: float | None = 1.0, register: bool = True) -> None:
        self.name, self.judge, self.run = name, judge, run
        self.resample_temperature = resample_temperature
        self._active: ContextVar[_Active | None] = ContextVar(f"faultlens_rerunnable_{name}", default=None)
        if register:
            register_rerunner(self)

    # -- what the agent program calls -----------------------------------------
    def agent(self, fn: F) -> F:
        """Decorator: `fn(task) -> answer` is the program this rerunner records and re-runs."""
        self.run = fn
        return fn

    def completion(self, *, agent: str = "main", **kwargs: Any) -> Any:
        """`litellm.completion(**kwargs)`, recorded as one step of `agent` (and replayed in a rerun)."""
        import litellm

        active = self._active.get()
        if active is None:
            return litellm.completion(**kwargs)
        if kwargs.get("stream"):
            raise FaultlensError(f"{self.name}: streamed completions cannot be recorded; call without stream=True")
        # What is recorded (and compared on replay) has its secrets redacted; the call itself gets them.
        request = redact(_jsonable(kwargs))
        active.call = kwargs
        response = active.session.call("model", agent, request,
                                       lambda _: _message_dict(litellm.completion(**kwargs).choices[0].message))
        text = str(response.get("content") or "")
        calls = response.get("tool_calls") or []
        step = Step(index=len(active.steps), agent=agent, kind=StepKind.tool_call if calls else StepKind.llm_call,
                    content=text or json.dumps(calls, ensure_ascii=False), model=str(kwargs.get("model") or "") or None)
        if calls:
            step.tool_name = calls[0]["function"]["name"]
            step.tool_arguments = calls[0]["function"]["arguments"]
        active.steps.append(step)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        return litellm.ModelResponse(model=str(kwargs.get("model") or ""), choices=[{"message": message, "finish_reason": "stop"}])

    def tool(self, fn: F | None = None, *, name: str | None = None, agent: str = "main") -> Any:
        """Decorator: a tool whose calls are recorded as steps of `agent` (results must be JSON-serialisable)."""

        def decorate(func: F) -> F:
            tool_name = name or func.__name__
            signature = inspect.signature(func)

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                active = self._active.get()
                if active is None:
                    return func(*args, **kwargs)
                arguments = _jsonable(dict(signature.bind(*args, **kwargs).arguments))
                request = {"tool": tool_name, "arguments": arguments}
                response = active.session.call("tool", agent, request, lambda req: {"output": func(**req["arguments"])})
                output = response["output"]
                active.steps.append(Step(index=len(active.steps), agent=agent, kind=StepKind.tool_result,
                                         content=output if isinstance(output, str) else json.dumps(output, ensure_ascii=False),
                                         tool_name=tool_name, tool_arguments=arguments, tool_result=output))
                return output

            return wrapper  # type: ignore[return-value]

        return decorate(fn) if fn is not None else decorate

    # -- running -----------------------------------------------------------------
    def _execute(self, query: str, session: Session) -> tuple[list[Step], Any, BaseException | None]:
        if self.run is None:
            raise FaultlensError(f"rerunner {self.name!r} has no program: pass run= or decorate it with @rerunner.agent")
        active = _Active(session)
        token = self._active.set(active)
        try:
            answer, error = self.run(query), None
        except Drift:
            raise
        except Exception as exc:  # the program broke: a failed run, with its steps so far
            answer, error = None, exc
        finally:
            self._active.reset(token)
        return active.steps, answer, error

    def _outcome(self, query: str, answer: Any, error: BaseException | None) -> Outcome:
        if error is not None:
            return Outcome(success=False, detail=f"the run raised {type(error).__name__}: {error}", evaluator=self.name)
        verdict = self.judge(query, answer)
        if isinstance(verdict, Outcome):
            return verdict
        if not isinstance(verdict, bool):
            raise FaultlensError(f"the judge of {self.name!r} returned {type(verdict).__name__}; expected a bool or an Outcome")
        return Outcome(success=verdict, detail=f"answer: {str(answer)[:200]}", evaluator=self.name)

    @staticmethod
    def _mark_answer(steps: list[Step], answer: Any) -> None:
        # The model call that wrote the returned answer is the run's final answer.
        if isinstance(answer, str) and answer.strip():
            for step in reversed(steps):
                if step.kind == StepKind.llm_call:
                    if answer.strip() in step.content:
                        step.kind = StepKind.final_answer
                    break

    def record(self, task: Task | str, *, trace_id: str | None = None) -> Trace:
        """Run the program live on `task`, judge it, and return its trace (recording included)."""
        task = task if isinstance(task, Task) else Task(query=str(task))
        session = Session()
        steps, answer, error = self._execute(task.query, session)
        self._mark_answer(steps, answer)
        agents = list(dict.fromkeys(s.agent for s in steps))
        return Trace(id=trace_id or new_id(), task=task, agents=[AgentInfo(name=a) for a in agents], steps=steps,
                     outcome=self._outcome(task.query, answer, error),
                     source=Source(framework="litellm", benchmark=self.name, format="faultlens"),
                     metadata={"rerunner": self.name, "recording": session.recorded.to_json()})

    # -- the Rerunner protocol -------------------------------------------------
    def can_rerun(self, trace: Trace) -> bool:
        return trace.source.benchmark == self.name and isinstance(trace.metadata.get("recording"), list)

    def _recording(self, trace: Trace) -> Recording:
        try:
            recording = Recording.from_json(trace.metadata["recording"])
        except (KeyError, TypeError, ValueError) as exc:
            raise NotRerunnable(f"trace {trace.id}: metadata.recording is missing or malformed ({type(exc).__name__}: {exc})") from exc
        if len(recording) != len(trace.steps):
            raise NotRerunnable(f"trace {trace.id}: {len(recording)} recorded calls for {len(trace.steps)} steps")
        return recording

    def _resample(self, record: CallRecord) -> dict[str, Any]:
        """Call t of a rerun, asked anew (only model calls are re-sampled)."""
        import litellm

        active = self._active.get()
        assert active is not None  # overrides run inside `session.call`, inside `_execute`
        kwargs = dict(active.call)
        if self.resample_temperature is not None:
            kwargs["temperature"] = self.resample_temperature
        return _message_dict(litellm.completion(**kwargs).choices[0].message)

    def rerun(self, trace: Trace, step: int, replacement: str | None = None) -> Trial:
        """Replay up to `step`, regenerate it (or put `replacement` there), continue live and judge."""
        recording = self._recording(trace)
        if not 0 <= step < len(trace.steps):
            raise NotRerunnable(f"step {step} is not a step of trace {trace.id} ({len(trace.steps)} steps)")
        started = time.monotonic()
        kind = recording[step].kind
        overrides: dict[int, Callable[[CallRecord], Any]] = {}
        if replacement is not None:
            overrides[step] = lambda record: {"output": replacement} if kind == "tool" else {"content": replacement}
        elif kind == "model":
            overrides[step] = self._resample
        session = Session(recording, replay_until=step, overrides=overrides, reuse_unchanged_from=step + 1)
        try:
            steps, answer, error = self._execute(trace.task.query, session)
        except Drift as drift:
            raise NotRerunnable(f"{self.name}: the program is not deterministic: {drift}") from drift
        outcome = self._outcome(trace.task.query, answer, error)
        new = steps[step].content if step < len(steps) else ""
        return Trial(step=step, success=outcome.success, changed=new != trace.steps[step].content, regenerated=new[:REGENERATED_KEPT],
                     live_calls=session.live + len(overrides), seconds=round(time.monotonic() - started, 4),
                     detail=outcome.detail or "")
