"""The failure taxonomy shared with Who&When Pro: 22 modes in 6 categories.

It lives in middleware because it is part of the shared vocabulary: gold labels,
attributions and lessons all carry a mode code. `injectors.applicability` re-exports
it for the error generators; attributors use it in their prompts.

`applies_to` names the step kinds a mode can be injected at or blamed on, and
`needs` a property the step must have (media for perception modes, another agent
for coordination modes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeGuard

from .trace import StepKind
from ..errors import UnknownName

K = StepKind


@dataclass(frozen=True)
class FailureMode:
    code: str
    category: str
    name: str
    definition: str
    example: str
    applies_to: frozenset[StepKind] = field(default_factory=frozenset)
    needs: str | None = None  # "media" | "multi_agent" | "tool" | None

    def line(self) -> str:
        return f"{self.code} {self.name}: {self.definition}"


_ALL_ACTING = frozenset({K.message, K.llm_call, K.plan, K.final_answer, K.tool_call})

MODES: tuple[FailureMode, ...] = (
    # Perception
    FailureMode("P.1", "Perception", "visual misidentification",
                "The agent names the wrong object, label, colour or entity in an image or frame.",
                "Reads the bar labelled 'Q3' as 'Q2' and reports the wrong quarter.",
                frozenset({K.llm_call, K.message, K.tool_result}), "media"),
    FailureMode("P.2", "Perception", "spatial/grounding error",
                "The agent locates something in the wrong place, order or relation (left/right, before/after, which element).",
                "Says the red square appears before the circle when it appears after.",
                frozenset({K.llm_call, K.message, K.tool_call}), "media"),
    FailureMode("P.3", "Perception", "misread visual output",
                "The agent reads a value, count or text from visual content incorrectly.",
                "Reads a bar height of 42 as 24.",
                frozenset({K.llm_call, K.message, K.tool_result}), "media"),
    # Reasoning
    FailureMode("R.1", "Reasoning", "hallucination",
                "The agent states a fact, source or value that appears nowhere in its inputs and is false.",
                "Cites a founding year that no document mentions.",
                _ALL_ACTING),
    FailureMode("R.2", "Reasoning", "reasoning error",
                "The agent draws a conclusion that does not follow from correct premises it had.",
                "Given 'A is north of B' and 'B is north of C', concludes C is north of A.",
                _ALL_ACTING),
    FailureMode("R.3", "Reasoning", "numerical/calculation error",
                "The agent computes a wrong number from correct inputs (arithmetic, units, rounding, aggregation).",
                "Adds 17 and 25 and writes 32.",
                _ALL_ACTING),
    FailureMode("R.4", "Reasoning", "task misunderstanding",
                "The agent answers or works on a different question than the one asked, or ignores a stated constraint.",
                "Asked for the cheapest item under $50, it returns the best-rated one.",
                frozenset({K.plan, K.message, K.llm_call, K.final_answer})),
    # Planning
    FailureMode("PL.1", "Planning", "ineffective plan",
                "The plan is feasible but cannot reach the goal efficiently or at all (wrong order, missing sub-goal).",
                "Plans to answer before looking up the second entity of a two-hop question.",
                frozenset({K.plan, K.message})),
    FailureMode("PL.2", "Planning", "infeasible plan",
                "The plan relies on tools, data or permissions that do not exist or cannot work.",
                "Plans to call a 'database' tool the team does not have.",
                frozenset({K.plan, K.message})),
    FailureMode("PL.3", "Planning", "goal drift",
                "The agent abandons or replaces the original goal mid-run and pursues another.",
                "Halfway through, starts summarising the documents instead of answering.",
                frozenset({K.plan, K.message, K.llm_call})),
    # Action
    FailureMode("A.1", "Action", "wrong tool/action",
                "The agent calls a real tool or takes a real action that is the wrong one for the situation.",
                "Clicks 'Add to cart' on the second result instead of the cheapest.",
                frozenset({K.tool_call}), "tool"),
    FailureMode("A.2", "Action", "wrong tool parameters",
                "The right tool is called with wrong, missing or mistyped arguments.",
                "Searches for 'Marla Voss' when the question names 'Marta Voss'.",
                frozenset({K.tool_call}), "tool"),
    FailureMode("A.3", "Action", "hallucinated tool/action",
                "The agent invokes a tool or action that does not exist, or claims to have run one it did not run.",
                "Reports 'I ran the tests and they pass' without calling the test tool.",
                frozenset({K.tool_call, K.message, K.llm_call})),
    FailureMode("A.4", "Action", "output format/syntax error",
                "The output breaks the required format or syntax (bad JSON, code that does not parse, wrong answer format).",
                "Returns the answer as '42 units' when a bare integer is required.",
                frozenset({K.tool_call, K.final_answer, K.message, K.llm_call})),
    FailureMode("A.5", "Action", "premature termination",
                "The agent stops or answers before the task is done.",
                "Gives a final answer after the first search, before the second hop.",
                frozenset({K.final_answer, K.message, K.plan})),
    FailureMode("A.6", "Action", "repetition/looping",
                "The agent repeats the same action or message without making progress.",
                "Calls search with the same query four times in a row.",
                frozenset({K.tool_call, K.message, K.llm_call})),
    # Verification
    FailureMode("V.1", "Verification", "context/memory loss",
                "The agent forgets or contradicts information established earlier in the run.",
                "Uses the population from an earlier, discarded document.",
                _ALL_ACTING),
    FailureMode("V.2", "Verification", "missing or wrong verification",
                "A check is skipped, or approves a wrong result, or rejects a right one.",
                "The verifier replies 'verified' without comparing the value to the source.",
                frozenset({K.message, K.llm_call, K.tool_call})),
    FailureMode("V.3", "Verification", "system/environment error",
                "A tool, service or environment fails (timeout, crash, bad data) and the failure is not handled.",
                "The search tool times out and the agent proceeds as if it had results.",
                frozenset({K.tool_result, K.tool_call})),
    # Coordination
    FailureMode("C.1", "Coordination", "delegation/orchestration error",
                "The orchestrator assigns a sub-task to the wrong agent, or in the wrong order, or not at all.",
                "Asks the calculator to search the corpus.",
                frozenset({K.message, K.plan}), "multi_agent"),
    FailureMode("C.2", "Coordination", "communication failure",
                "An agent passes on information incorrectly or incompletely to another agent.",
                "The reader reports 1,250 to the answerer when the document says 12,500.",
                frozenset({K.message}), "multi_agent"),
    FailureMode("C.3", "Coordination", "over-reliance on another agent",
                "An agent accepts another agent's wrong output without the check its role requires.",
                "The answerer copies the reader's number although the question asks for a difference.",
                frozenset({K.message, K.final_answer}), "multi_agent"),
)

BY_CODE: dict[str, FailureMode] = {m.code: m for m in MODES}
CODES: tuple[str, ...] = tuple(m.code for m in MODES)
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(m.category for m in MODES))


def get_mode(code: str) -> FailureMode:
    try:
        return BY_CODE[code.strip().upper()]
    except KeyError:
        raise UnknownName(f"unknown failure mode {code!r}; known codes: {', '.join(CODES)}") from None


def is_mode(code: str | None) -> TypeGuard[str]:
    return code is not None and code.strip().upper() in BY_CODE


def taxonomy_text() -> str:
    """The taxonomy as prompt text: one line per mode, grouped by category."""
    lines = []
    for category in CATEGORIES:
        lines.append(f"{category}:")
        lines.extend(f"  {m.line()}" for m in MODES if m.category == category)
    return "\n".join(lines)
