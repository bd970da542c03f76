"""Which steps are decisions, and which decision a tool result or an executor's output is about.

Real frameworks record more than decisions: tool results, a code executor's
output (`Computer_terminal`, a tool-runner user proxy), system prompts,
termination checks. A step's `role` (see `StepRole`) says which. Every offline
attributor uses the two functions here the same way: it blames decision steps
(`candidates`), and evidence found on a tool result or an executor's output
counts for the decision that caused it (`cause_of`), unless the tool itself
failed on a correct call (an environment fault, which stays on the tool step).
"""

from __future__ import annotations

import re

from .trace import Step, StepKind, StepRole, Trace

# Participant names that run code or tools for others instead of deciding
# (AutoGen/CaptainAgent's Computer_terminal, Magentic-One's ComputerTerminal,
# user proxies that only execute). Matched against the whole name.
EXECUTOR_NAME = re.compile(r"(?i)^(computer[_ ]?terminal|terminal|code[_ ]?executor|executor|tool[_ ]?runner|"
                           r"user[_ ]?proxy|executor[_ ]?agent|python[_ ]?executor|shell)$")


def executor_name(name: str | None) -> bool:
    """True for a participant whose messages are an executor's output, not decisions."""
    return name is not None and bool(EXECUTOR_NAME.match(name.strip()))


def candidates(trace: Trace) -> list[Step]:
    """The steps an attributor may blame by default: the decisions, and tool steps that are the only record of
    their own call (`cause_of` gives the step itself); all steps if the trace records neither."""
    found = [s for s in trace.steps if s.role == StepRole.decision or cause_of(trace, s.index) == s.index]
    return found or list(trace.steps)


def cause_of(trace: Trace, index: int) -> int | None:
    """The decision step a non-decision step is evidence about, or None (control steps, no decision around).

    In order: the nearest earlier call of the same tool (a result recorded
    apart from its call); the decision recorded inside the step's own span (a
    span whose output is the observation, such as smolagents' step span); the nearest earlier decision of the same agent under
    the same parent span (the model call that issued a tool call); the decision its parent
    span stands for (an agent whose own code called the tool: its step comes
    after the tool's, when the agent returns); the nearest earlier decision of
    the same agent; the tool step itself when it records its own arguments
    (an `execute_tool` span is call and result in one, and nothing else of
    its agent came before); the latest decision before it (an executor runs
    the code of whoever spoke last); else the next decision. A decision is its
    own cause.
    """
    step = trace.steps[index]
    if step.role == StepRole.decision:
        return index
    if step.role == StepRole.control:
        return None
    decisions = [s for s in trace.steps if s.role == StepRole.decision]
    earlier = [s for s in reversed(decisions) if s.index < index]
    by_span = _cause_by_spans(step, decisions, earlier)
    if by_span is not None:
        return by_span
    for s in earlier:
        if s.agent == step.agent:
            return s.index
    if step.tool_arguments is not None and step.role == StepRole.tool_result:
        # An execute_tool span that records its own arguments, with no decision of its agent before it:
        # the span is the only record of the call, so it answers for the call itself.
        return index
    if earlier:
        return earlier[0].index
    later = [s for s in decisions if s.index > index]
    return later[0].index if later else None


def _cause_by_spans(step: Step, decisions: list[Step], earlier: list[Step]) -> int | None:
    """`cause_of`'s rules that read the span tree and tool names: the call of the same tool, the decision inside the
    step's own span, a decision under the same parent span, the decision the parent span stands for."""
    if step.tool_name is not None:
        for s in earlier:
            if s.kind == StepKind.tool_call and s.tool_name == step.tool_name and s.parent_span_id == step.parent_span_id:
                return s.index
    if step.span_id is not None:
        # A span whose own output is the observation (smolagents' step span: "Execution logs") was caused by the
        # model call recorded inside it, not by a sibling of the span.
        inside = [s for s in decisions if s.parent_span_id == step.span_id]
        if inside:
            before = [s for s in inside if s.index < step.index]
            return (before[-1] if before else inside[0]).index
    if step.parent_span_id is not None:
        for s in earlier:
            if s.parent_span_id == step.parent_span_id and s.agent == step.agent:
                return s.index
        for s in decisions:
            if s.span_id == step.parent_span_id:
                return s.index
    return None
