"""What a finished run shows about its own failure: numeric features read from the trace's evidence alone.

A production run has no reference answer, no gold label, no answer key and no
benchmark; so these features read only what every run has: the task's text
and the steps (who acted, what they said, which tools they called with what,
what came back, which errors). `detector_view` makes the copy they read:
`attributor_view` without the reference answer, and without the outcome,
source (framework, benchmark, format) and metadata.

The evidence, each a few features:

- an error the run moved past: failed tool steps, and decisions that go on after
  one without a word about it (`attributors.evidence`)
- a task's parts the final answer leaves out: the task's numbers and names, the
  successful lookups' items, that the answer does not mention
- a number or name the answer states that no step gave
- a loop: the same action repeated, the longest run of one action
- a give-up: "I cannot", "unable to", "sorry" in the final answer
- a handoff that never returned: the last word is not the first agent's
- the requested format not met (JSON, a number, yes or no, a list)
- run length, tool calls, errors (the label-free baselines)

Runs of thousands of steps are read in linear time (the per-step evidence
looks at the last `WINDOW` decisions only); media is not read (a run with
images is scored on its text).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.model.trace import Source, Step, StepKind, StepRole, Trace

from ..evidence import FAILURE_WORDS, evidence, step_error
from ..steptext import numbers, norm, step_text

WINDOW = 60  # decisions whose per-step evidence is read (the finders look back over the run: quadratic)
_GIVE_UP = re.compile(r"\b(unknown|not found|unverified|undetermined|n/a|none found|i (?:can ?not|can't|am unable|was unable|could not|couldn't)|unable to|not able to|sorry|apolog\w+|"
                      r"i don'?t know|no (?:answer|solution)|cannot (?:be )?(?:determine|find|answer|complete|help)|"
                      r"gave up|give up|insufficient (?:data|information)|not possible)\b", re.I)
_NAME = re.compile(r"\b[A-Z][a-zA-Z]{2,}(?:\s+[A-Z][a-zA-Z]{2,})*\b")
_QUOTED = re.compile(r"[\"'“‘]([^\"'”’\n]{2,40})[\"'”’]")
_WANTS_JSON = re.compile(r"\bjson\b", re.I)
_WANTS_NUMBER = re.compile(r"\b(how (?:many|much)|what (?:is the )?(?:number|total|sum|count|amount|price|percentage)|"
                           r"compute|calculate)\b", re.I)
_WANTS_YES_NO = re.compile(r"\b(yes or no|true or false|whether)\b", re.I)
_WANTS_LIST = re.compile(r"\b(list (?:all|every|each|the)|comma[- ]separated|each of|for each|all of the)\b", re.I)
_ERROR_TEXT = re.compile(r"\s*[\[{(\"']*\s*(error|exception|traceback|failed|failure)\b", re.I)
_YES_NO = re.compile(r"\b(yes|no|true|false)\b", re.I)
_EMPTY = re.compile(r"\b(no \w+ (?:matched|found)|no match\w*|nothing (?:found|matched)|no results?|not found|no such|empty|"
                    r"does not exist|unavailable|error|failed|invalid|denied|refused|timed? ?out)\b", re.I)
_NEGATIVE = re.compile(r"\b(not found|unverified|no (?:document|record|data|result|information|evidence)\w*|unknown|"
                       r"could not|couldn'?t|cannot|can't|unable|missing|incorrect|wrong|mismatch|does not match|failed)\b", re.I)
_WORD = re.compile(r"[a-z][a-z-]{3,}")
_STOP_WORDS = frozenset("what which where when with that this from have does into than then them they their there these those "
                        "about after before each every many much more most other some such only also given find answer please "
                        "would could should using used uses your task question report total value number".split())
_STOP_NAMES = frozenset("The This That What Which When Where Who How Please Use Find Give Return Answer Task Question Report "
                        "Then And For With From Your You Our Its All Each Also Here There Note Step Final Result".split())

BASELINES = ("n_steps", "n_errors", "n_tool_calls")  # the label-free baselines the detector must beat


def detector_view(trace: Trace) -> Trace:
    """The trace as a detector may read it: no gold, answer key, reference answer, outcome, source or metadata."""
    view = attributor_view(trace, with_reference=False)
    steps = [s.model_copy(update={"metadata": {}}) if s.metadata else s for s in view.steps]
    return view.model_copy(update={"outcome": None, "source": Source(), "metadata": {}, "steps": steps})


def _final(trace: Trace) -> Step | None:
    """The step that gave the answer: the last final answer, else the last agent decision that is not a tool call
    (a person's or simulated user's turn, such as a closing "thanks", is no answer)."""
    for step in reversed(trace.steps):
        if step.kind == StepKind.final_answer:
            return step
    for step in reversed(trace.steps):
        if _agent_decision(step) and step.kind != StepKind.tool_call and (step.content or "").strip():
            return step
    return None


def _agent_decision(step: Step) -> bool:
    return step.role == StepRole.decision and step.kind != StepKind.human


def _step_failed(step: Step) -> bool:
    """A step that reports an error: its `error`, an error-shaped result, or a tool's text result opening with one."""
    if step.error or step_error(step):
        return True
    result = step.tool_result if step.kind in (StepKind.tool_call, StepKind.tool_result) else None
    return isinstance(result, str) and bool(_ERROR_TEXT.match(result))


def _action_key(step: Step) -> str:
    if step.tool_name:
        return f"{step.agent}\x00{step.tool_name}\x00{json.dumps(step.tool_arguments, sort_keys=True, default=str)}"
    return f"{step.agent}\x00{norm(step.content or '')[:300]}"


def _items(step: Step) -> list[str]:
    args = step.tool_arguments
    values = args.values() if isinstance(args, dict) else (args if isinstance(args, list) else [args])
    return [str(v).strip() for v in values if isinstance(v, (str, int, float)) and not isinstance(v, bool) and 0 < len(str(v).strip()) <= 40]


def _names(text: str) -> set[str]:
    return {m for m in _NAME.findall(text) if m.split()[0] not in _STOP_NAMES}


def _loop_features(decisions: list[Step]) -> dict[str, float]:
    keys = [_action_key(s) for s in decisions if s.tool_name or len(norm(s.content or "")) >= 20]
    counts = Counter(keys)
    longest = streak = 0
    for i, key in enumerate(keys):
        streak = streak + 1 if i and key == keys[i - 1] else 1
        longest = max(longest, streak)
    repeated = sum(c - 1 for c in counts.values())
    return {"repeated_actions": repeated, "repeat_share": repeated / len(keys) if keys else 0.0,
            "max_same_action": max(counts.values(), default=0), "longest_streak": longest}


def _error_features(trace: Trace, final: Step | None) -> dict[str, float]:
    failed = [s for s in trace.steps if _step_failed(s)]
    last_failed = failed[-1].index if failed else -1
    after = [s for s in trace.steps[last_failed + 1:] if s.role == StepRole.decision] if failed else []
    final_text = (final.content or "") if final else ""
    return {"n_errors": len(failed), "error_share": len(failed) / max(1, len(trace.steps)),
            "ended_on_error": float(bool(trace.steps) and trace.steps[-1].index == last_failed),
            "moved_past_error": float(bool(failed) and bool(after) and not FAILURE_WORDS.search(final_text)),
            "final_reports_failure": float(bool(FAILURE_WORDS.search(final_text))),
            "errors_after_first_half": sum(1 for s in failed if s.index >= len(trace.steps) / 2)}


def _evidence_features(trace: Trace, decisions: list[Step], final: Step | None) -> dict[str, float]:
    kinds: Counter[str] = Counter()
    for step in decisions[-WINDOW:]:
        kinds.update(e.kind for e in evidence(trace, step.index))
    on_final = {e.kind for e in evidence(trace, final.index)} if final else set()
    out: dict[str, float] = {}
    for kind in ("dropped_after_failure", "silent_after_failure", "own_call_failed", "repeats", "unsupported_values"):
        out[f"ev_{kind}"] = kinds[kind]
        out[f"final_{kind}"] = float(kind in on_final)
    return out


def _grounding_features(trace: Trace, final: Step | None) -> dict[str, float]:
    """Values the answer states that no tool or task gave, and task or lookup items the answer leaves out."""
    if final is None:
        return {"final_new_numbers": 0, "final_unsourced_numbers": 0, "final_new_names": 0, "task_items_missing": 0,
                "task_items_missing_share": 0.0, "lookup_items_missing": 0, "decision_unsourced_numbers": 0}
    answer = final.content or ""
    before = trace.steps[:final.index]
    task = trace.task.query or ""
    sourced = set(numbers(task)) | {n for s in before if s.role != StepRole.decision or s.kind == StepKind.tool_result
                                    for n in numbers(step_text(s))}
    said = sourced | {n for s in before for n in numbers(step_text(s))}
    answer_numbers = [n for n in dict.fromkeys(numbers(answer)) if len(n.lstrip("-")) >= 2]
    seen_text = norm(task + " " + " ".join(step_text(s) for s in before[-400:]))
    new_names = [n for n in _names(answer) if norm(n) not in seen_text]
    task_items = [n for n in dict.fromkeys(numbers(task)) if len(n) >= 2] + sorted(_names(task)) + _QUOTED.findall(task)
    answer_norm = norm(answer)
    missing = [i for i in task_items if norm(i) and norm(i) not in answer_norm]
    lookups = {i for s in before if s.kind == StepKind.tool_call and s.tool_name and not _step_failed(s) for i in _items(s)}
    unsourced_decisions = 0
    for s in trace.steps[-400:]:
        if s.role == StepRole.decision and s.kind != StepKind.tool_call:
            unsourced_decisions += sum(1 for n in numbers(s.content or "") if len(n.lstrip("-")) >= 2 and n not in sourced)
    return {"final_new_numbers": sum(1 for n in answer_numbers if n not in said),
            "final_unsourced_numbers": sum(1 for n in answer_numbers if n not in sourced),
            "final_new_names": len(new_names), "task_items_missing": len(missing),
            "task_items_missing_share": len(missing) / len(task_items) if task_items else 0.0,
            "lookup_items_missing": sum(1 for i in lookups if norm(i) and norm(i) not in answer_norm),
            "decision_unsourced_numbers": unsourced_decisions}


def _format_features(task: str, answer: str) -> dict[str, float]:
    unmet = 0
    if _WANTS_JSON.search(task):
        try:
            json.loads(answer.strip().strip("`").removeprefix("json").strip())
        except ValueError:
            unmet += 1
    if _WANTS_NUMBER.search(task) and not numbers(answer):
        unmet += 1
    if _WANTS_YES_NO.search(task) and not _YES_NO.search(answer):
        unmet += 1
    if _WANTS_LIST.search(task) and len(re.split(r"[,;\n]", answer)) < 2:
        unmet += 1
    return {"format_unmet": unmet}


def _lookup_features(trace: Trace, decisions: list[Step]) -> dict[str, float]:
    """Lookups that came back empty or failed, and agents that say so (a failure the run may carry forward)."""
    results = [s for s in trace.steps if s.kind == StepKind.tool_result or (s.kind == StepKind.tool_call and s.tool_result is not None)]
    empty = [s for s in results if _EMPTY.search(str(s.tool_result if s.tool_result is not None else s.content)[:300])]
    negative = [s for s in decisions if _NEGATIVE.search(s.content or "")]
    last_empty = empty[-1].index if empty else -1
    return {"n_empty_results": len(empty), "empty_result_share": len(empty) / len(results) if results else 0.0,
            "empty_after_first_half": sum(1 for s in empty if s.index >= len(trace.steps) / 2),
            "last_result_empty": float(bool(results) and results[-1].index == last_empty),
            "n_negative_decisions": len(negative), "negative_share": len(negative) / len(decisions) if decisions else 0.0}


def _coverage_features(trace: Trace, decisions: list[Step], final: Step | None) -> dict[str, float]:
    """The task's content words the agents never speak of, and agents that were handed work and never answered."""
    task_words = {w for w in _WORD.findall((trace.task.query or "").lower()) if w not in _STOP_WORDS}
    spoken = set(_WORD.findall(" ".join(action for s in decisions[-400:] for action in [(s.content or "")[:2000]]).lower()))
    answer = set(_WORD.findall(((final.content or "") if final else "").lower()))
    agents = {s.agent for s in trace.steps}
    unreturned = 0
    for s in decisions[-WINDOW:]:
        later = {x.agent for x in trace.steps[s.index + 1:]}
        text = (s.content or "") + " " + (s.tool_name or "")
        unreturned += sum(1 for a in agents if a != s.agent and len(a) > 2 and re.search(rf"\b{re.escape(a)}\b", text, re.I) and a not in later)
    missing = [w for w in task_words if w not in spoken]
    return {"task_words_unspoken": len(missing), "task_words_unspoken_share": len(missing) / len(task_words) if task_words else 0.0,
            "task_words_in_answer_share": len(task_words & answer) / len(task_words) if task_words else 0.0,
            "handoffs_unanswered": unreturned,
            "agents_never_acting": len({a.name for a in trace.agents} - {s.agent for s in trace.steps})}


def _shape_features(trace: Trace, decisions: list[Step], final: Step | None) -> dict[str, float]:
    agents = [s.agent for s in decisions]
    first = agents[0] if agents else None
    answer = (final.content or "") if final else ""
    return {"n_steps": len(trace.steps), "log_steps": math.log1p(len(trace.steps)),
            "n_tool_calls": sum(1 for s in trace.steps if s.kind == StepKind.tool_call),
            "n_agents": len(set(agents)), "n_decisions": len(decisions),
            "has_final_answer": float(any(s.kind == StepKind.final_answer for s in trace.steps)),
            "no_answer": float(final is None or not answer.strip()),
            "answer_log_chars": math.log1p(len(answer)),
            "handoff_unreturned": float(len(set(agents)) > 1 and final is not None and final.agent != first),
            "ends_with_tool": float(bool(trace.steps) and trace.steps[-1].kind in (StepKind.tool_call, StepKind.tool_result)),
            "give_up": float(bool(_GIVE_UP.search(answer))),
            "give_up_anywhere": sum(1 for s in decisions[-WINDOW:] if _GIVE_UP.search(s.content or ""))}


def features(trace: Trace) -> dict[str, float]:
    """The run's features, by name (`FEATURE_NAMES` order). Reads `detector_view(trace)` only."""
    view = detector_view(trace)
    decisions = [s for s in view.steps if _agent_decision(s)]
    final = _final(view)
    out: dict[str, float] = {}
    out.update(_shape_features(view, decisions, final))
    out.update(_error_features(view, final))
    out.update(_loop_features(decisions))
    out.update(_evidence_features(view, decisions, final))
    out.update(_grounding_features(view, final))
    out.update(_format_features(view.task.query or "", (final.content or "") if final else ""))
    out.update(_lookup_features(view, decisions))
    out.update(_coverage_features(view, decisions, final))
    return {k: float(v) for k, v in out.items()}


# A run's shape beside its own system's other runs (no label read): shorter or longer than usual, fewer calls.
RELATIVE = ("log_steps", "n_tool_calls", "n_decisions", "answer_log_chars", "n_empty_results", "task_words_unspoken_share")


def group_key(trace: Trace) -> str:
    """The system a run belongs to, as a production store knows it: the set of agents that acted."""
    return "\x00".join(sorted({s.agent for s in trace.steps}))


def with_relative(rows: list[dict[str, float]], groups: list[str]) -> list[dict[str, float]]:
    """Rows with `rel_*` features: each value minus the median of its group's runs (0 in a group of one)."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    out = [dict(r) for r in rows]
    for members in by_group.values():
        for name in RELATIVE:
            values = sorted(rows[i][name] for i in members)
            median = values[len(values) // 2]
            for i in members:
                out[i][f"rel_{name}"] = rows[i][name] - median if len(members) > 1 else 0.0
        for i in members:
            out[i]["group_log_size"] = math.log1p(len(members) - 1)
    return out


def _names_of_features() -> list[str]:
    from faultlens.middleware.model.trace import Task

    probe = Trace(task=Task(query="q"), steps=[Step(index=0, agent="a", content="x")])
    return list(with_relative([features(probe)], ["a"])[0])


FEATURE_NAMES: list[str] = _names_of_features()
