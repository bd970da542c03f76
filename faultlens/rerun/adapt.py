"""`faultlens adapt`: learn a user's system from its own successful runs, by warm-start injection through re-runs.

For each successful run the gateway recorded, two kinds of attempt:

- **drawn** (the system's own slips): each call is drawn anew from the user's
  upstream (`--draws` times), as a sampled model answers differently; a new
  reply that differs is put in the call's place and the program re-run with the
  calls before it replayed and the rest live. A run that now fails is re-run
  once more with that reply (the rest drawn anew again): failing twice, it is
  a failure of that call (a later slip would have to strike twice), labelled
  with no mode (none was chosen).
- **injected** (a few (call, mode) pairs): the recorded reply of that call is
  rewritten into an error of the mode (the
injection pipeline's generators, `injectors.proxy_mistakes.chat_error`, with
the values the runs' tool arguments took as the domain's distractors), the
  program is re-run with the calls before it replayed exactly, that reply
  injected, and the rest live (`trial.run_trial`).

The judge decides. A re-run that fails is a failure of the user's own system
with an exact label (agent, call, mode): it is stored as a labelled run marked as injected
(`source.benchmark = "adapt"`, `metadata.injected`), and written to
`OUT/injected.jsonl`. Every attempt is appended to `OUT/attempts.jsonl`, so an
interrupted run resumes where it stopped. Then `learned` is trained on the
shipped data plus these runs, the drawn and the injected ones two sources
(`kind_of`) (`OUT/model.joblib`), and scored before and
after on the injected runs of held-out source runs.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultlens.injectors.proxy_mistakes import NoErrorForMode, chat_error
from faultlens.middleware.capture.live_gateway import completion_outputs, completion_text
from faultlens.middleware.capture.upstream import GatewayUpstream
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.model.trace import AgentInfo, GoldLabel, Outcome, Source, Step, StepKind, Trace
from faultlens.middleware.replay.gateway_calls import call_steps, recording_of, request_of
from faultlens.middleware.replay.rerunners import Trial
from faultlens.middleware.replay.session import CallRecord, Recording
from faultlens.middleware.store import Store
from .contract import Judge, Program
from .trial import TrialSpec, draw_anew, run_trial

__all__ = ["DEFAULT_MODES", "DRAWN", "Attempt", "AdaptResult", "adapt", "injected_trace", "kind_of", "train_adapted"]

# Modes whose rules rewrite an ordinary chat reply of any system (a number, a name, a tool call's argument, ...).
DEFAULT_MODES = ("R.3", "R.1", "C.2", "V.1", "A.2", "A.1", "A.4")
DRAWN = "drawn"  # the attempts' "mode" for a call drawn anew (the system's own slip; its failures are labelled with no mode)
NO_RERUN = frozenset({"no_rule", "unchanged"})  # attempt results that cost no re-run of the program
RETRIED = frozenset({"upstream_error", "timeout", "judge_timeout"})  # results of a passing trouble: tried again on resume
BENCHMARK = "adapt"
MIN_VALUE = 3  # shorter argument values (ids like "1", flags) would match inside any text


@dataclass
class Attempt:
    """One injection tried: where, what came of it (injected: the re-run failed, a labelled run was kept)."""

    key: str
    run: str
    call: int
    step: int
    mode: str
    result: str  # injected, still_succeeded, no_rule; unchanged, unconfirmed (drawn); or a trial outcome that shows nothing (drift, ...)
    detail: str = ""


@dataclass
class AdaptResult:
    attempts: list[Attempt] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)  # the labelled failed runs, this session's and earlier ones'

    def yield_by_mode(self) -> dict[str, dict[str, int]]:
        """Per mode: attempts, and how many gave a labelled failure."""
        out: dict[str, Counter[str]] = {}
        for attempt in self.attempts:
            out.setdefault(attempt.mode, Counter())[attempt.result] += 1
        return {mode: {"attempts": sum(c.values()), "injected": c["injected"], **dict(c)} for mode, c in sorted(out.items())}


def _openai_request(record: CallRecord) -> dict[str, Any]:
    """The recorded call's request in OpenAI's shape, as far as the error generators read it (roles, text, tools)."""
    messages = []
    for message in record.request.get("messages") or []:
        text = "\n".join(str(p.get("content", "")) for p in message.get("parts") or [] if p.get("type") == "text")
        messages.append({"role": message.get("role", "user"), "content": text})
    return {"messages": messages, **{k: v for k, v in (record.request.get("params") or {}).items() if k == "tools"}}


def argument_values(recordings: list[Recording]) -> list[list[str]]:
    """The user's own interchangeable values: per (tool, argument), the text values it took in the runs' tool calls.

    Given to the error rules as distractors, so a wrong argument (A.2) or a wrong entity (R.1) swaps a value for one
    the same argument took in another run (another company, another year's page, another order), as a confused agent
    would, where a rule with no values of the domain can only change a digit.
    """
    seen: dict[tuple[str, str], dict[str, None]] = {}
    calls = [part for recording in recordings for record in recording.calls for output in completion_outputs(record.response)
             for part in output["parts"] if part["type"] == "tool_call" and isinstance(part["arguments"], dict)]
    for call in calls:  # arguments parsed from their JSON by `completion_outputs`; a call whose were not is passed over
        for key, value in call["arguments"].items():
            if isinstance(value, str) and len(value.strip()) >= MIN_VALUE:
                seen.setdefault((str(call["name"]), key), {})[value] = None
    return [list(values) for values in seen.values() if len(values) > 1]


def injected_reply(recording: Recording, call: int, mode: str, seed: int,
                   distractors: list[list[str]] | None = None) -> tuple[dict[str, Any], str]:
    """(call `call`'s recorded reply rewritten into an error of `mode`, the reason); `NoErrorForMode` if no rule applies."""
    record = recording[call]
    override = chat_error(mode, seed=seed, distractors=distractors)
    response = override(CallRecord(record.index, record.kind, record.agent, _openai_request(record), record.response))
    return response, override.injected[-1]["reason"]  # type: ignore[attr-defined]


def injected_trace(source: Trace, calls: Recording, call: int, step_of_call: int, mode: str, reason: str, detail: str,
                   key: str) -> Trace:
    """The failed re-run of attempt `key` as a labelled run: one step per model call, the injected call's step as the
    gold (`mode` DRAWN: a new draw's failure, labelled with no mode)."""
    steps = [Step(index=i, agent=record.agent, kind=StepKind.llm_call, content=completion_text(record.response),
                  metadata={"input_messages": record.request.get("messages") or [], "request": record.request.get("params") or {},
                            "output_messages": completion_outputs(record.response)})
             for i, record in enumerate(calls.calls)]
    agents = list(dict.fromkeys(record.agent for record in calls.calls))
    return Trace(id=f"{BENCHMARK}:{key}", task=source.task.model_copy(update={"reference_answer": None}),
                 agents=[AgentInfo(name=a) for a in agents], steps=steps,
                 outcome=Outcome(success=False, evaluator="adapt", detail=detail[:300]),
                 source=Source(framework=source.source.framework, benchmark=BENCHMARK, format="faultlens"),
                 gold=GoldLabel(step=call, agent=calls.calls[call].agent, mode=None if mode == DRAWN else mode, reason=reason),
                 metadata={"injected": True, "from_run": source.id, "from_step": step_of_call, **({"drawn": True} if mode == DRAWN else {})})


def kind_of(trace: Trace) -> str:
    """"drawn" (a new draw's failure) or "injected" (an error rule's): two sources of training data, weighed apart
    (`learned.model.source_weights`), so a few of the system's own slips are not drowned by many injected errors."""
    return DRAWN if trace.metadata.get("drawn") else "injected"


def successful_runs(store: Store, limit: int | None = None) -> list[Trace]:
    """The store's successful runs that the gateway recorded (the ones a re-run can replay), oldest first."""
    runs: list[Trace] = []
    summaries = sorted(store.list_traces(status="succeeded", limit=None), key=lambda s: s.created_at or 0)
    for summary in summaries:
        if limit and len(runs) >= limit:
            break  # read no more runs than are used
        if summary.benchmark == BENCHMARK:
            continue  # a run adapt made itself
        trace = store.get_trace(summary.id)
        if call_steps(trace):
            runs.append(trace)
    return runs


def plan(runs: list[Trace], modes: tuple[str, ...], seed: int) -> Iterator[tuple[Trace, list[tuple[int, str]]]]:
    """Per run, every (call, mode) pair in an order drawn from `seed`: tried in turn until `per_run` of them were re-run
    (a pair no rule of the mode applies to costs no re-run and is passed over)."""
    for trace in runs:
        calls = len(call_steps(trace))
        pairs = [(c, m) for c in range(calls) for m in modes]
        random.Random(f"{seed}:{trace.id}").shuffle(pairs)
        yield trace, pairs


def _read_attempts(path: Path) -> dict[str, Attempt]:
    """The attempts made, by key (the last line of a key wins); one that a failing upstream or a timeout cut short is
    left out, so a resumed run tries it again."""
    if not path.exists():
        return {}
    done = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            data = json.loads(line)
            done[data["key"]] = Attempt(**data)
    return {key: attempt for key, attempt in done.items() if attempt.result not in RETRIED}


def adapt(store: Store, program: Program, upstream: GatewayUpstream, out: Path, *, judge: Judge | None = None,
          runs: int | None = 50, per_run: int = 3, modes: tuple[str, ...] = DEFAULT_MODES, draws: int = 1, seed: int = 0,
          on_attempt: Callable[[Attempt, int, int], None] | None = None) -> AdaptResult:
    """Make labelled failures of the successful runs of `store` by re-running `program`: new draws, then injections.

    Per run, each call is drawn anew `draws` times (a draw that gives the recorded reply costs one model call and no
    re-run); then `per_run` injections: (call, mode) pairs are taken in a seeded order, and a pair no rule of the
    mode applies to is recorded (`no_rule`) and passed over. Resumable: attempts already in `out/attempts.jsonl` are
    not tried again, but for those a failing upstream or a timeout cut short (`RETRIED`).
    `on_attempt(attempt, n, total)` follows each attempt but a pair with no rule.
    """
    sources = successful_runs(store, runs)
    if not sources:
        raise ConfigError("no successful run recorded through the gateway in this store: record runs with `faultlens gateway` "
                          "and post their outcomes first")
    out.mkdir(parents=True, exist_ok=True)
    attempts_path, traces_path = out / "attempts.jsonl", out / "injected.jsonl"
    done = _read_attempts(attempts_path)
    result = AdaptResult(attempts=list(done.values()))
    kept = {t.id: t for t in _read_traces(traces_path)}
    plans = list(plan(sources, modes, seed))
    values = argument_values([recording_of(trace) for trace in sources])
    total = sum(len(call_steps(trace)) * draws + per_run for trace, _ in plans)
    made = 0

    def keep(attempt: Attempt, labelled: Trace | None) -> None:
        nonlocal made
        if labelled is not None:
            store.save_trace(labelled)
            kept[labelled.id] = labelled
            with traces_path.open("a", encoding="utf-8") as f:
                f.write(labelled.model_dump_json() + "\n")
        with attempts_path.open("a", encoding="utf-8") as f:  # after the trace: a crash between the two re-tries, never loses
            f.write(json.dumps(attempt.__dict__, ensure_ascii=False) + "\n")
        result.attempts.append(attempt)
        if attempt.result != "no_rule":
            made += 1
            if on_attempt is not None:
                on_attempt(attempt, made, total)

    for trace, pairs in plans:
        recording, steps = recording_of(trace), call_steps(trace)  # once a run, whatever number of attempts it takes
        for call in range(len(steps)):
            for n in range(draws):
                key = f"{trace.id}/{call}-{DRAWN}{n}"
                if key in done:
                    made += 1
                else:
                    keep(*_drawn_attempt(key, trace, recording, steps, call, program, judge or Judge(), upstream))
        rerun = 0
        for call, mode in pairs:
            if rerun >= per_run:
                break
            key = f"{trace.id}/{call}-{mode}"
            attempt = done.get(key)
            if attempt is None:
                attempt, labelled = _attempt(key, trace, recording, steps, call, mode, seed, program, judge or Judge(), upstream, values)
                keep(attempt, labelled)
            elif attempt.result != "no_rule":
                made += 1
            rerun += attempt.result not in NO_RERUN
    result.traces = list(kept.values())
    return result


def _judge_for(trace: Trace, judge: Judge) -> Judge:
    """`judge`, with the run's reference answer as the last resort when it has none of its own."""
    if judge.reference is None and trace.task.reference_answer:
        return Judge(judge.command, trace.task.reference_answer, judge.timeout)
    return judge


def _drawn_attempt(key: str, trace: Trace, recording: Recording, steps: list[int], call: int, program: Program, judge: Judge,
                   upstream: GatewayUpstream) -> tuple[Attempt, Trace | None]:
    """Call `call` drawn anew; a new reply re-run in its place, and a failure re-run once more with it (module docstring)."""
    step, judge = steps[call], _judge_for(trace, judge)
    spec = TrialSpec(recording, call, step, trace.task.query)
    drawn = draw_anew(spec, trace.steps[step].agent, request_of(trace.steps[step]), upstream)
    if isinstance(drawn, Trial):  # the recorded reply again (no re-run), or an upstream that failed
        detail = "the same reply as recorded (one model call, no re-run)" if drawn.outcome == "unchanged" else drawn.detail[:200]
        return Attempt(key, trace.id, call, step, DRAWN, str(drawn.outcome), detail), None
    spec.replacement = drawn
    trial, calls = run_trial(spec, program, judge, upstream)
    if trial.outcome not in ("failure", "crash"):
        return Attempt(key, trace.id, call, step, DRAWN, "still_succeeded" if trial.outcome == "success" else str(trial.outcome),
                       trial.detail[:200]), None
    again, _ = run_trial(spec, program, judge, upstream)
    if again.outcome not in ("failure", "crash"):
        return Attempt(key, trace.id, call, step, DRAWN, "unconfirmed", f"failed, then {again.outcome}: {again.detail[:150]}"), None
    reason = (f"A new draw of this call ({completion_text(drawn)[:200]!r}) failed the run twice, where the recorded reply "
              "had succeeded.")
    return (Attempt(key, trace.id, call, step, DRAWN, "injected", trial.detail[:200]),
            injected_trace(trace, calls, call, step, DRAWN, reason, trial.detail, key))


def _attempt(key: str, trace: Trace, recording: Recording, steps: list[int], call: int, mode: str, seed: int, program: Program,
             judge: Judge, upstream: GatewayUpstream, values: list[list[str]]) -> tuple[Attempt, Trace | None]:
    step = steps[call]
    try:
        reply, reason = injected_reply(recording, call, mode, seed, values)
    except NoErrorForMode as exc:
        return Attempt(key, trace.id, call, step, mode, "no_rule", str(exc)[:200]), None
    trial, calls = run_trial(TrialSpec(recording, call, step, trace.task.query, replacement=reply), program, _judge_for(trace, judge), upstream)
    if trial.outcome == "failure" or trial.outcome == "crash":
        labelled = injected_trace(trace, calls, call, step, mode, reason, trial.detail, key)
        return Attempt(key, trace.id, call, step, mode, "injected", trial.detail[:200]), labelled
    result = "still_succeeded" if trial.outcome == "success" else str(trial.outcome)
    return Attempt(key, trace.id, call, step, mode, result, trial.detail[:200]), None


def _read_traces(path: Path) -> list[Trace]:
    if not path.exists():
        return []
    return [Trace.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_by_source(traces: list[Trace], test_share: float = 0.3, seed: int = 0) -> tuple[list[Trace], list[Trace]]:
    """(train, test): the injected runs of a share of the source runs are held out whole (never a run's siblings on both sides)."""
    sources = sorted({t.metadata.get("from_run", t.id) for t in traces})
    random.Random(seed).shuffle(sources)
    held = set(sources[: max(1, round(len(sources) * test_share))]) if len(sources) > 1 else set()
    return ([t for t in traces if t.metadata.get("from_run", t.id) not in held],
            [t for t in traces if t.metadata.get("from_run", t.id) in held])


def score(attributor: Any, traces: list[Trace]) -> dict[str, float]:
    """Step and agent accuracy of `attributor` on labelled `traces` (the gold never shown to it)."""
    from faultlens.middleware.model.answer_key import attributor_view

    hits_step = hits_agent = 0
    for trace in traces:
        attribution = attributor.attribute(attributor_view(trace))
        assert trace.gold is not None
        hits_step += attribution.step == trace.gold.step
        hits_agent += attribution.agent == trace.gold.agent
    n = len(traces) or 1
    return {"n": len(traces), "step": hits_step / n, "agent": hits_agent / n}


def train_adapted(result: AdaptResult, out: Path, *, seed: int = 0, test_share: float = 0.3) -> dict[str, Any]:
    """Train `learned` on the shipped data plus the injected runs of the training sources (`out/model.joblib`), the
    injected runs given half the weight (`model.OWN_SHARE`: the model is for this system); score shipped and adapted
    `learned` and `blend` on the held-out sources' injected runs."""
    from faultlens.attributors.learned.attributor import LearnedAttributor
    from faultlens.attributors.learned.blend import Blend
    from faultlens.benchmark.train import SHIPPED_DATASETS, train_learned

    train, test = split_by_source(result.traces, test_share, seed)
    if not train:
        raise ConfigError(f"{len(result.traces)} labelled run(s) from too few source runs to train on: adapt more runs (--runs)")
    own = []
    for kind in sorted({kind_of(t) for t in train}):  # one file a kind: each its own source (`kind_of`)
        data = out / f"train-{kind}.jsonl"
        data.write_text("".join(t.model_dump_json() + "\n" for t in train if kind_of(t) == kind), encoding="utf-8")
        own.append(f"jsonl:{data}")
    model_path = out / "model.joblib"
    train_learned([*SHIPPED_DATASETS, *own], out=model_path, seed=seed, own=own)
    table = {"train": len(train), "test": len(test), "model": str(model_path)}
    if test:
        table["before"] = {"learned": score(LearnedAttributor(), test), "blend": score(Blend(), test)}
        table["after"] = {"learned": score(LearnedAttributor(model_path=model_path), test),
                          "blend": score(Blend(model_path=model_path), test)}
    (out / "report.json").write_text(json.dumps({"yield": result.yield_by_mode(), "scores": table}, indent=2), encoding="utf-8")
    return table
