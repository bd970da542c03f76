"""Per-step features of a trace, computed from the trace alone.

Every feature must be computable on a trace that is only a list of messages
(no tool spans, no timings, no media, no reference answer), as the public
formats (Who&When) import them: fields that are absent contribute zeros, never
an error. Nothing here reads the gold label or the reference answer.

Feature groups (names are stable; they are stored with the model):

- position: index, relative position, first/last, steps to the end, trace length;
- turns: agent's share of steps, the k-th step of its agent, first appearance
  of an agent, a change of speaker, the agent that gave the final answer;
- kind: one-hot of `Step.kind`;
- tool errors: `error` set on this or the next step, failure words in this
  step's text or in the next step's (a tool result answering it);
- content: where values of the final answer first appear, numbers this step
  introduces that were not in the task or any earlier step and whether later
  steps carry them forward, numbers of earlier steps this one drops
  (a contradiction), near-exact repeats of the same agent's earlier text;
- heuristic: the weight each `heuristic` signal puts on this step;
- text: a small hashing vectorizer over the step's own words and its
  kind/agent-role tokens (scikit-learn `HashingVectorizer`, no vocabulary to ship).

The design choice: features describe a step relative to its trace ("the
first step that introduces a value of the final answer"), never an
environment's templates, so a model trained on some environments can be
applied to others.
"""

from __future__ import annotations

import difflib
import math
import re

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer

from middleware.model import Step, StepKind, Trace

from ..methods.heuristic import SIGNALS, Context, _answer_values, _final_step, _norm, _numbers, _text

TEXT_FEATURES = 256
_KINDS = [k.value for k in StepKind]
_FAILURE = re.compile(r"\b(error|exception|traceback|failed|failure|not found|no results?|invalid|timeout|timed out|"
                      r"denied|unavailable|cannot|unable to|wrong|incorrect|mismatch)\b", re.I)
_CORRECTION = re.compile(r"\b(actually|correction|instead|mistake|re-?check|re-?calculat\w*|should be|not correct|"
                         r"disagree|however|recompute|verify|verified|confirm\w*)\b", re.I)
_APPROVAL = re.compile(r"\b(looks good|approved?|lgtm|correct|confirmed|all good|verified)\b", re.I)

_hasher = HashingVectorizer(n_features=TEXT_FEATURES, alternate_sign=False, norm="l2", lowercase=True,
                            token_pattern=r"(?u)\b[a-zA-Z_][a-zA-Z_:.]+\b")


def dense_feature_names() -> list[str]:
    """Names of the dense features, in column order."""
    names = ["pos.index_log", "pos.relative", "pos.is_first", "pos.is_last", "pos.to_end_log", "pos.n_steps_log",
             "pos.in_first_third", "pos.in_last_third",
             "turn.agent_share", "turn.agent_ordinal_log", "turn.agent_first_appearance", "turn.speaker_change",
             "turn.final_agent", "turn.n_agents_log", "turn.single_agent"]
    names += [f"kind.{k}" for k in _KINDS]
    names += ["err.this", "err.next", "err.prev", "err.words_this", "err.words_next", "err.first_error_step",
              "content.len_log", "content.answer_value_here", "content.answer_first_here", "content.answer_first_action",
              "content.new_numbers_log", "content.new_numbers_any", "content.new_numbers_carried",
              "content.new_numbers_in_answer", "content.first_new_number_step", "content.dropped_numbers_log",
              "content.repeat_ratio", "content.exact_repeat", "content.later_correction", "content.correction_words",
              "content.approval_words", "content.mentions_task_numbers", "content.is_final_answer_step",
              "content.before_answer_origin"]
    names += [f"heur.{s}" for s in SIGNALS if s != "reference_lost"]
    return names


def text_feature_names() -> list[str]:
    return [f"text.h{i}" for i in range(TEXT_FEATURES)]


def feature_names() -> list[str]:
    return dense_feature_names() + text_feature_names()


def _own_text(step: Step) -> str:
    """What the step's agent wrote, plus a tool's result (message-only traces have content alone)."""
    return _text(step)


def _agent_role(trace: Trace, agent: str) -> str:
    for info in trace.agents:
        if info.name == agent:
            return info.role or ""
    return ""


def _heuristic_weights(trace: Trace) -> dict[str, np.ndarray]:
    """The weight of each heuristic signal on each step, without the reference answer."""
    ctx = Context(with_reference=False)
    out: dict[str, np.ndarray] = {}
    for name, signal in SIGNALS.items():
        if name == "reference_lost":  # needs the reference answer: never a feature
            continue
        weights = np.zeros(len(trace.steps))
        for hit in signal(trace, ctx):
            if 0 <= hit.step < len(trace.steps):
                weights[hit.step] += hit.weight
        out[name] = weights
    return out


def trace_features(trace: Trace) -> sparse.csr_matrix:
    """One row per step: the dense features then the hashed text features."""
    steps = trace.steps
    n = len(steps)
    if n == 0:
        return sparse.csr_matrix((0, len(feature_names())))
    texts = [_own_text(s) for s in steps]
    norms = [_norm(t) for t in texts]
    numbers = [set(_numbers(t)) for t in texts]
    task_numbers = set(_numbers(trace.task.query or ""))
    final = _final_step(trace)
    answer_values = _answer_values(_text(final))
    agents = [s.agent for s in steps]
    agent_counts = {a: agents.count(a) for a in set(agents)}
    heur = _heuristic_weights(trace)

    answer_here = [any(v in norms[i] or v in numbers[i] for v in answer_values) for i in range(n)]
    answer_first = next((i for i in range(n) if answer_here[i]), None)
    answer_first_action = next((i for i in range(n) if answer_here[i] and steps[i].kind != StepKind.tool_result), None)
    errors = [bool(s.error) or bool(_FAILURE.search(texts[i])) and s.kind == StepKind.tool_result for i, s in enumerate(steps)]
    first_error = next((i for i in range(n) if errors[i]), None)

    seen_numbers = set(task_numbers)
    new_numbers: list[set[str]] = []
    for i in range(n):
        new_numbers.append(numbers[i] - seen_numbers)
        seen_numbers |= numbers[i]
    first_new = next((i for i in range(n) if new_numbers[i] and steps[i].kind != StepKind.tool_result), None)
    later_numbers = [set() for _ in range(n)]
    acc: set[str] = set()
    for i in range(n - 1, -1, -1):
        later_numbers[i] = set(acc)
        acc |= numbers[i]
    corrections_after = [False] * n
    found = False
    for i in range(n - 1, -1, -1):
        corrections_after[i] = found
        found = found or bool(_CORRECTION.search(texts[i]))
    answer_numbers = set(_numbers(_text(final)))

    rows = []
    seen_agents: set[str] = set()
    ordinal: dict[str, int] = {}
    previous_by_agent: dict[str, list[str]] = {}
    for i, step in enumerate(steps):
        a = step.agent
        ordinal[a] = ordinal.get(a, 0) + 1
        prior = previous_by_agent.get(a, [])
        ratio = max((difflib.SequenceMatcher(None, norms[i][:400], p[:400]).ratio() for p in prior[-3:]), default=0.0)
        exact = float(bool(norms[i]) and norms[i] in prior)
        previous_by_agent.setdefault(a, []).append(norms[i])
        prev_numbers = set().union(*numbers[max(0, i - 3):i]) if i else set()
        dropped = prev_numbers - numbers[i] - later_numbers[i] if step.kind != StepKind.tool_result else set()
        row = [
            math.log1p(i), i / (n - 1) if n > 1 else 0.0, float(i == 0), float(i == n - 1), math.log1p(n - 1 - i),
            math.log1p(n), float(i < n / 3), float(i >= 2 * n / 3),
            agent_counts[a] / n, math.log1p(ordinal[a]), float(a not in seen_agents), float(i > 0 and agents[i - 1] != a),
            float(a == final.agent), math.log1p(len(agent_counts)), float(len(agent_counts) == 1),
        ]
        row += [float(step.kind.value == k) for k in _KINDS]
        row += [
            float(bool(step.error)), float(i + 1 < n and bool(steps[i + 1].error)), float(i > 0 and bool(steps[i - 1].error)),
            float(bool(_FAILURE.search(texts[i]))), float(i + 1 < n and bool(_FAILURE.search(texts[i + 1]))),
            float(first_error == i),
            math.log1p(len(texts[i])), float(answer_here[i]), float(answer_first == i), float(answer_first_action == i),
            math.log1p(len(new_numbers[i])), float(bool(new_numbers[i])),
            float(bool(new_numbers[i] & later_numbers[i])), float(bool(new_numbers[i] & answer_numbers)),
            float(first_new == i), math.log1p(len(dropped)),
            ratio, exact, float(corrections_after[i]), float(bool(_CORRECTION.search(texts[i]))),
            float(bool(_APPROVAL.search(texts[i]))), float(bool(numbers[i] & task_numbers)), float(step is final),
            float(answer_first is not None and i <= answer_first),
        ]
        row += [float(heur[s][i]) for s in heur]
        rows.append(row)
        seen_agents.add(a)
    dense = sparse.csr_matrix(np.asarray(rows, dtype=np.float64))
    docs = [f"kind:{s.kind.value} role:{_agent_role(trace, s.agent) or 'none'} tool:{s.tool_name or 'none'} " + texts[i][:2000]
            for i, s in enumerate(steps)]
    return sparse.hstack([dense, _hasher.transform(docs)], format="csr")
