"""Per-step features of a trace, computed from the trace alone, built to transfer across environments.

Every feature must be computable on a trace that is only a list of messages
(no tool spans, no timings, no media, no reference answer), as the public
formats (Who&When) import them: fields that are absent contribute zeros, never
an error. Nothing here reads the gold label or the reference answer.

The design choice: a feature describes a step *relative to its trace* ("the
first step that introduces a value of the final answer", "the longest step of
the trace"), never an environment's wording. Hashed words of the step text
were tried and dropped: they learned each environment's templates and lost to
`baseline:first-step` when the environment was held out (leave-one-environment-
out, see `benchmark.train`); so were the `heuristic` signals' weights (same
test on dev: step accuracy 0.349 with them, 0.377 without). The model ranks the steps of one trace, so what
matters is how a step compares with the other steps of the same trace; the
per-trace features (`rank.*`, `z.*`, `first.*`) make that explicit.

Feature groups (names are stable; they are stored with the model):

- `pos.*`: relative position, first / second / last step, position among the
  agents' own (non tool-result) steps. Absolute positions (index, steps to the
  end, trace length) were dropped: they describe an environment's trace
  lengths, and leaving them out raised the leave-one-environment-out step
  accuracy on dev;
- `turn.*`: agent's share of steps, the k-th step of its agent, the first step
  of a turn (speaker change), the first appearance of an agent, the agent of
  step 0 and of the final answer, number of agents;
- `kind.*`: `Step.kind` one-hot, whether the step is one an agent wrote (a
  decision), and whether it is the first call of its tool;
- `role.*`: `Step.role` one-hot (decision, tool result, executor output,
  control), and whether a tool step failed as an environment fault. Only
  decisions (and environment faults) are ranked; what a result showed is a
  feature of its cause (`err.own_result*`, via `middleware.model.roles.cause_of`);
- `err.*`: a tool error on this / the next / the previous step, failure words,
  a retry (the same tool called again right after), steps since the last error,
  an error in this decision's own results, and the first decision after a
  failure, and whether it goes on silently (no failure word, no retry);
- `heuristic.*`: the `heuristic` method's signal weight on the step (hits
  moved to the decisions they are about) and whether it is the heuristic's
  top step. Trained on bundled data alone they hurt (dev LOEO step accuracy
  0.349 with, 0.377 without); with TRAIL's train half in training they help
  (measured while developing: TRAIL holdout 0.414 without, 0.483 with;
  bundled test 0.661 / 0.664);
- `content.*`: values (numbers and capitalised names) of the final answer
  first appearing here, values never seen before in the trace (task text
  included), whether later steps carry them forward, whether a later step
  redoes this one with different values (a contradiction) or repeats it,
  overlap with the task text and with the previous step, correction /
  approval / hedging words, text length;
- `rank.*`, `z.*`: a continuous feature's descending rank within the trace
  (0 = largest) and its z-score within the trace;
- `first.*`, `before.*`: the first step of the trace where a binary feature
  holds, and whether the step comes before that first occurrence.

Tried and dropped (issue 13, item 3): features relating a decision to the
evidence of its trace and to the use of its output. Per decision: values it
states that neither the task nor any earlier observation (tool result,
executor output) gave it (count, share, any); whether it is the first to
state a value of the final answer that no observation held ("answers from
memory"), the final answer's values matched as whole values (not "20" in
"2020"); observations before / after it; whether it caused any observation
(a step's logs credited to the model call inside its span), whether those
results brought values a later decision used or nobody used, and whether they
brought the final answer; with their within-trace ranks and first occurrence.
As rules on TRAIL's train half they do not beat the position prior (always
the run's step 2: 30 of 77; first decision with results 24, first
unsupported answer 15, first decision whose results bring the answer 19).
In the model, cross-validated step accuracy by
`scripts/model_select.py --realdev ../shared/realdev` (balance 0.5, same
trees), AgentRx / TRAIL / frameworks / own envs:

    without them (shipped)                      0.200 / 0.390 / 0.859 / 0.693
    all of them                                 0.200 / 0.377 / 0.858 / 0.698
    all, results credited inside the span       0.267 / 0.390 / 0.860 / 0.696
    without the broad ranks and firsts          0.200 / 0.390 / 0.857 / 0.692
    ... answer values matched whole             0.200 / 0.377 / 0.853 / 0.700
    the same with --balance 0.8                 0.333 / 0.364 / 0.845 / 0.693
    only the three sharpest (unsupported
    answer, has results, answer from results)   0.200 / 0.390 / 0.855 / 0.688

One or two TRAIL runs (0.013-0.026) and one AgentRx run (0.067) are noise, so
none was kept; the code is in git history (commit 80e236f, "learned features
experiment (not shipped)").
"""

from __future__ import annotations

import math
import re

import numpy as np

from faultlens.middleware.model.trace import StepKind, StepRole, Trace
from faultlens.middleware.model.roles import cause_of

from ..methods.heuristic import signal_weights
from ..steptext import answer_values as _answer_values
from ..steptext import environment_fault, final_step, norm, numbers, side_effect, step_text

_KINDS = [k.value for k in StepKind]
_ROLES = [r.value for r in StepRole]
_FAILURE = re.compile(r"\b(error|exception|traceback|failed|failure|not found|no results?|invalid|timeout|timed out|"
                      r"denied|unavailable|cannot|unable to|wrong|incorrect|mismatch)\b", re.I)
_CORRECTION = re.compile(r"\b(actually|correction|instead|mistake|re-?check\w*|re-?calculat\w*|should be|not correct|"
                         r"disagree|however|recompute|again|second look|double-?check\w*)\b", re.I)
_APPROVAL = re.compile(r"\b(looks good|approved?|lgtm|correct|confirmed|all good|verified|pass(es|ed)?)\b", re.I)
_HEDGE = re.compile(r"\b(i assume|assuming|assume|probably|i guess|i think|most likely|not sure|presumably|maybe|seems?)\b", re.I)
_WORD = re.compile(r"[a-z][a-z_]{2,}")
_NAME = re.compile(r"\b[A-Z][a-zA-Z]{2,}\b")
_STOP = frozenset("the and for with that this from are was were has have had will not but you your our its into then than "
                  "what which when who how let me now all any can one two per each step".split())

# Continuous features that also get a within-trace rank and z-score.
_RELATIVE = ["content.len_log", "content.new_values_log", "content.written_new_words_log", "content.new_words_frac", "content.task_overlap",
             "content.prev_overlap", "content.later_max_overlap", "turn.agent_share"]
# Binary features whose first occurrence in the trace is its own feature.
_FIRSTS = ["content.written_new_values", "err.silent_after_error", "content.new_values_any", "content.answer_value_here", "content.new_values_in_answer", "err.any",
           "err.next", "content.contradicted_later", "content.repeated_later", "content.hedge_words",
           "content.correction_words", "turn.speaker_change", "kind.tool_call", "content.new_values_carried", "act.side_effect"]


def _base_names() -> list[str]:
    names = ["pos.relative", "pos.is_first", "pos.is_second", "pos.is_last", "pos.action_relative", "pos.is_first_action",
             "turn.agent_share", "turn.agent_ordinal_log", "turn.agent_first_appearance", "turn.speaker_change",
             "turn.final_agent", "turn.first_agent", "turn.n_agents_log", "turn.single_agent", "turn.turn_ordinal_log"]
    names += [f"kind.{k}" for k in _KINDS]
    names += [f"role.{r}" for r in _ROLES] + ["role.environment_fault", "err.own_result", "err.own_result_words",
                                                 "err.first_decision_after_error", "err.silent_after_error", "kind.first_use_of_tool",
                                                 "heuristic.weight", "heuristic.top"]
    names += ["kind.agent_written", "kind.after_tool_result",
              "err.this", "err.next", "err.prev", "err.any", "err.words_this", "err.words_next", "err.retry",
              "err.since_last_log",
              "content.len_log", "content.answer_value_here", "content.new_values_log", "content.new_values_any",
              "content.new_values_carried", "content.new_values_in_answer", "content.new_words_frac",
              "content.dropped_values_log", "content.contradicted_later", "content.repeated_later",
              "content.later_max_overlap", "content.task_overlap", "content.task_values", "content.prev_overlap",
              "content.correction_words", "content.approval_words", "content.hedge_words", "content.is_final_answer",
              "content.later_correction", "content.written_new_values", "content.written_new_words_log",
              "content.task_value_frac",
              "act.side_effect", "act.requests_side_effect", "act.requests_first_side_effect", "act.side_effect_tool_first",
              "act.reports_result", "act.other_agent_decision"]
    return names


_BASE = _base_names()
_INDEX = {name: i for i, name in enumerate(_BASE)}


def dense_feature_names() -> list[str]:
    """Names of the features, in column order."""
    return (_BASE + [f"rank.{f}" for f in _RELATIVE] + [f"z.{f}" for f in _RELATIVE]
            + [f"first.{f}" for f in _FIRSTS] + [f"before.{f}" for f in _FIRSTS])


def feature_names() -> list[str]:
    """All feature names (every feature is dense; kept for the model file's check)."""
    return dense_feature_names()


def _values(text: str) -> set[str]:
    """The values a step states: numbers and capitalised words (names, and the headings that open a line).

    Sentence-opening words are kept on purpose: dropping them lowered the
    leave-one-environment-out step accuracy on dev (0.334 -> 0.293). Function
    words that open a sentence ("The", "What", "This") are no value, though:
    counted as one, every answer sentence "introduced a new value".
    """
    return set(numbers(text)) | {w for w in (m.lower() for m in _NAME.findall(text)) if w not in _STOP}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _within_trace(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Descending rank scaled to [0, 1] (0 = largest; ties share the best rank) and z-score, within one trace."""
    n = len(column)
    if n == 1:
        return np.zeros(1), np.zeros(1)
    rank = np.array([np.sum(column > v) for v in column], dtype=np.float64) / (n - 1)
    std = column.std()
    z = (column - column.mean()) / std if std > 0 else np.zeros(n)
    return rank, z


def _own_results(trace: Trace, texts: list[str], written: list[bool]) -> tuple[list[bool], list[bool]]:
    """What the results of each decision (its tool results, the executor's output of its code) showed: an error, failure words."""
    n = len(texts)
    own_error, own_words = [False] * n, [False] * n
    for i, s in enumerate(trace.steps):
        if not written[i]:
            cause = cause_of(trace, i)
            if cause is not None:
                own_error[cause] = own_error[cause] or bool(s.error)
                own_words[cause] = own_words[cause] or bool(_FAILURE.search(texts[i]))
    return own_error, own_words


def _novelty(values: list[set[str]], words: list[set[str]], task_values: set[str],
             task_words: set[str]) -> tuple[list[set[str]], list[int], list[float], list[set[str]]]:
    """Per step: values no earlier step (nor the task) gave, the count and share of such words, and the values of all later steps."""
    n = len(values)
    seen = set(task_values)
    seen_words = set(task_words)
    new_values: list[set[str]] = []
    new_words: list[int] = []
    new_words_frac: list[float] = []
    for i in range(n):
        new_values.append(values[i] - seen)
        new_words.append(len(words[i] - seen_words))
        new_words_frac.append(new_words[i] / len(words[i]) if words[i] else 0.0)
        seen |= values[i]
        seen_words |= words[i]
    later_values: list[set[str]] = [set() for _ in range(n)]
    acc: set[str] = set()
    for i in range(n - 1, -1, -1):
        later_values[i] = set(acc)
        acc |= values[i]
    return new_values, new_words, new_words_frac, later_values


def _correction_after(texts: list[str]) -> list[bool]:
    """Whether a later step uses correction words."""
    correction_after = [False] * len(texts)
    found = False
    for i in range(len(texts) - 1, -1, -1):
        correction_after[i] = found
        found = found or bool(_CORRECTION.search(texts[i]))
    return correction_after


def _after_errors(trace: Trace, texts: list[str], written: list[bool], errors: list[bool]) -> tuple[list[bool], list[bool], list[bool]]:
    """The first decision after a failure, whether it goes on silently, and whether a decision is the first call of its tool.

    A failure is a failed call or an error the executor printed; going on silently is no failure word and no retry
    of the failed tool. Silently dropping a failure is the decisive error of many real runs (the lookup that failed
    is left out of the report)."""
    steps = trace.steps
    n = len(steps)
    after_error, silent = [False] * n, [False] * n
    pending: int | None = None
    tools_seen: set[str] = set()
    first_tool = [False] * n
    for i, s in enumerate(steps):
        if written[i] and pending is not None:
            after_error[i] = True
            retried = s.tool_name is not None and s.tool_name == steps[pending].tool_name
            silent[i] = not _FAILURE.search(texts[i]) and not retried
            pending = None
        if errors[i] and not written[i]:
            pending = i
        if written[i] and s.kind == StepKind.tool_call and s.tool_name:
            first_tool[i] = s.tool_name not in tools_seen
            tools_seen.add(s.tool_name)
    return after_error, silent, first_tool


def _side_effects(trace: Trace, written: list[bool]) -> tuple[list[bool], list[bool], list[bool], list[bool]]:
    """Consequential actions (`steptext.side_effect`), the request each one carried out (the latest decision of
    another participant before it: a user's or a manager's instruction), that request for the first one, and
    whether the action is the first call of its tool."""
    steps = trace.steps
    n = len(steps)
    effects = [side_effect(s) for s in steps]
    requests, first_request, tool_first = [False] * n, [False] * n, [False] * n
    seen_tools: set[str] = set()
    first_done = False
    for i in range(n):
        if not effects[i]:
            continue
        name = steps[i].tool_name or ""
        tool_first[i] = name not in seen_tools
        seen_tools.add(name)
        for j in range(i - 1, -1, -1):
            if written[j] and steps[j].agent != steps[i].agent:
                requests[j] = True
                first_request[j] = first_request[j] or not first_done
                break
        first_done = True
    return effects, requests, first_request, tool_first


def _redone_later(i: int, trace: Trace, words: list[set[str]], values: list[set[str]], norms: list[str]) -> tuple[bool, bool, float]:
    """A later step that redoes step i: same words mostly, but other values (contradicted) or the same (repeated); and the
    largest word overlap with a later step of the same kind."""
    steps = trace.steps
    contradicted = repeated = False
    later_max = 0.0
    for j in range(i + 1, len(steps)):
        if steps[j].kind != steps[i].kind:
            continue
        overlap = _jaccard(words[i], words[j])
        later_max = max(later_max, overlap)
        if overlap >= 0.5 and values[i] and values[j]:
            if values[i] == values[j]:
                repeated = True
            elif values[i] - values[j]:
                contradicted = True
    if norms[i] and any(norms[i] == norms[j] for j in range(i + 1, len(steps))):
        repeated = True
    return contradicted, repeated, later_max


def _firsts(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `_FIRSTS`: the first step where it holds, and the steps before it (all steps when it never holds)."""
    n = rows.shape[0]
    firsts = np.zeros((n, len(_FIRSTS)))
    before = np.zeros((n, len(_FIRSTS)))
    for k, name in enumerate(_FIRSTS):
        hits = np.flatnonzero(rows[:, _INDEX[name]] > 0)
        if hits.size:
            firsts[hits[0], k] = 1.0
            before[:hits[0], k] = 1.0
        else:
            before[:, k] = 1.0
    return firsts, before


def trace_features(trace: Trace) -> np.ndarray:
    """One row per step (float64), columns as `feature_names()`."""
    steps = trace.steps
    n = len(steps)
    if n == 0:
        return np.zeros((0, len(feature_names())))
    texts = [step_text(s) for s in steps]
    norms = [norm(t) for t in texts]
    values = [_values(t) for t in texts]
    words = [_words(t) for t in texts]
    task_text = trace.task.query or ""
    task_values, task_words = _values(task_text), _words(task_text)
    final = final_step(trace)
    final_text = step_text(final)
    answer_values = [v for v in _answer_values(final_text)]
    answer_set = _values(final_text)
    agents = [s.agent for s in steps]
    agent_counts = {a: agents.count(a) for a in set(agents)}
    written = [s.kind != StepKind.tool_result and s.role == StepRole.decision for s in steps]

    errors = [bool(s.error) or (not written[i] and bool(_FAILURE.search(texts[i]))) for i, s in enumerate(steps)]
    own_error, own_words = _own_results(trace, texts, written)
    new_values, new_words, new_words_frac, later_values = _novelty(values, words, task_values, task_words)
    correction_after = _correction_after(texts)
    after_error, silent, first_tool = _after_errors(trace, texts, written, errors)

    effects, requests, first_request, effect_tool_first = _side_effects(trace, written)
    reports = [written[i] and steps[i].kind != StepKind.tool_call and i > 0 and not written[i - 1]
               and steps[i - 1].role == StepRole.tool_result for i in range(n)]
    deciders = [s.agent for i, s in enumerate(steps) if written[i]]
    # Ties go to the participant that decided first (not to a set's order, which changes with the hash seed).
    main_agent = max(dict.fromkeys(deciders), key=deciders.count) if deciders else None

    # The heuristic's documented signals (without the reference answer), moved to the decisions they are about.
    weights = signal_weights(trace)
    top_weight = max(weights.values(), default=0.0)

    rows = np.zeros((n, len(_BASE)))
    ordinal: dict[str, int] = {}
    seen_agents: set[str] = set()
    turns = 0
    last_error = None
    action_index = -1
    n_actions = max(1, sum(written))
    for i, step in enumerate(steps):
        a = step.agent
        ordinal[a] = ordinal.get(a, 0) + 1
        change = i > 0 and agents[i - 1] != a
        turns += change
        if written[i]:
            action_index += 1
        contradicted, repeated, later_max = _redone_later(i, trace, words, values, norms)
        prev_values = set().union(*values[max(0, i - 3):i]) if i else set()
        dropped = prev_values - values[i] - later_values[i] if written[i] else set()
        retry = (step.kind == StepKind.tool_call and step.tool_name is not None
                 and any(s.kind == StepKind.tool_call and s.tool_name == step.tool_name for s in steps[i + 1:i + 4]))
        answer_here = any(v in norms[i] or v in values[i] for v in answer_values) and step is not final
        f = {
            "pos.relative": i / (n - 1) if n > 1 else 0.0, "pos.is_first": i == 0,
            "pos.is_second": i == 1, "pos.is_last": i == n - 1,
            "pos.action_relative": max(action_index, 0) / max(1, n_actions - 1), "pos.is_first_action": written[i] and action_index == 0,
            "turn.agent_share": agent_counts[a] / n, "turn.agent_ordinal_log": math.log1p(ordinal[a] - 1),
            "turn.agent_first_appearance": a not in seen_agents, "turn.speaker_change": change,
            "turn.final_agent": a == final.agent, "turn.first_agent": a == agents[0],
            "turn.n_agents_log": math.log1p(len(agent_counts)), "turn.single_agent": len(agent_counts) == 1,
            "turn.turn_ordinal_log": math.log1p(turns),
            f"kind.{step.kind.value}": 1.0, "kind.agent_written": written[i],
            f"role.{step.role.value}": 1.0, "role.environment_fault": environment_fault(step),
            "err.own_result": own_error[i], "err.own_result_words": own_words[i],
            "err.first_decision_after_error": after_error[i], "err.silent_after_error": silent[i],
            "kind.first_use_of_tool": first_tool[i],
            "heuristic.weight": weights.get(i, 0.0), "heuristic.top": top_weight > 0 and weights.get(i, 0.0) == top_weight,
            "kind.after_tool_result": i > 0 and steps[i - 1].kind == StepKind.tool_result,
            "err.this": bool(step.error), "err.next": i + 1 < n and errors[i + 1], "err.prev": i > 0 and errors[i - 1],
            "err.any": errors[i], "err.words_this": bool(_FAILURE.search(texts[i])),
            "err.words_next": i + 1 < n and bool(_FAILURE.search(texts[i + 1])), "err.retry": retry,
            "err.since_last_log": math.log1p(i - last_error) if last_error is not None else 0.0,
            "content.len_log": math.log1p(len(texts[i])), "content.answer_value_here": answer_here,
            "content.new_values_log": math.log1p(len(new_values[i])), "content.new_values_any": bool(new_values[i]),
            "content.new_values_carried": bool(new_values[i] & later_values[i]),
            "content.new_values_in_answer": bool(new_values[i] & answer_set) and step is not final,
            "content.new_words_frac": new_words_frac[i], "content.dropped_values_log": math.log1p(len(dropped)),
            "content.contradicted_later": contradicted, "content.repeated_later": repeated,
            "content.later_max_overlap": later_max, "content.task_overlap": _jaccard(words[i], task_words),
            "content.task_values": bool(values[i] & task_values),
            "content.prev_overlap": _jaccard(words[i], words[i - 1]) if i else 0.0,
            "content.correction_words": bool(_CORRECTION.search(texts[i])),
            "content.approval_words": bool(_APPROVAL.search(texts[i])), "content.hedge_words": bool(_HEDGE.search(texts[i])),
            "content.is_final_answer": step is final, "content.later_correction": correction_after[i],
            # Values and words an agent states that neither the task nor any earlier step gave it: invented, or misread.
            "content.written_new_values": written[i] and bool(new_values[i]),
            "content.written_new_words_log": math.log1p(new_words[i]) if written[i] else 0.0,
            "act.side_effect": effects[i], "act.requests_side_effect": requests[i],
            "act.requests_first_side_effect": first_request[i], "act.side_effect_tool_first": effect_tool_first[i],
            # An agent's words right after a tool result: what it read there (a misread is decisive in many real runs).
            "act.reports_result": reports[i],
            # A decision by a participant other than the one that decides most (a simulated user, a sub-agent).
            "act.other_agent_decision": written[i] and main_agent is not None and a != main_agent,
            "content.task_value_frac": len(values[i] & task_values) / len(values[i]) if values[i] else 0.0,
        }
        for name, value in f.items():
            rows[i, _INDEX[name]] = float(value)
        seen_agents.add(a)
        if errors[i]:
            last_error = i

    relative = [_within_trace(rows[:, _INDEX[name]]) for name in _RELATIVE]
    ranks = np.column_stack([r for r, _ in relative])
    zs = np.column_stack([z for _, z in relative])
    firsts, before = _firsts(rows)
    return np.hstack([rows, ranks, zs, firsts, before])
