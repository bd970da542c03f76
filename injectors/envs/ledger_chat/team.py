"""The Semantic Kernel parts of `ledger_chat` that are ours: the group chat manager and the analyst's `ledger` plugin.

Imported by `env.program` only (it imports Semantic Kernel, the `frameworks2`
extra). No `from __future__ import annotations` here: SK reads a kernel
function's `Annotated` parameters from its signature.
"""

from typing import Annotated, Any

from semantic_kernel.agents.orchestration.group_chat import BooleanResult, GroupChatManager, MessageResult, StringResult
from semantic_kernel.contents import AuthorRole, ChatHistory, ChatMessageContent
from semantic_kernel.functions import kernel_function

from ..docs_team.calculator import calculate
from .world import CATEGORIES, DEPARTMENTS, QUARTERS, check_filters, figure, query_text


def last_spoken(chat_history: ChatHistory) -> ChatMessageContent | None:
    """The last agent message of the group chat (the manager's history also holds its own 'Transferred to' notes)."""
    spoken = [m for m in chat_history.messages if m.role == AuthorRole.ASSISTANT]
    return spoken[-1] if spoken else None


def next_speaker(last: ChatMessageContent | None) -> tuple[str, str]:
    """(the agent to speak next, why) after `last`: the analyst until it reports, then the reviewer; an approval goes
    to the reporter, a send-back to the analyst."""
    text = str(last.content or "") if last is not None else ""
    if last is None or last.name == "reporter":
        return "analyst", "The analyst starts."
    if last.name == "analyst":
        reported = "\nResult: " in text or text.startswith("Result: ")
        return ("reviewer", "The analyst has reported.") if reported else ("analyst", "The analyst is not done.")
    if text.startswith("APPROVED"):
        return "reporter", "The reviewer approved the report."
    return "analyst", "The reviewer sent the report back."


class LedgerChatManager(GroupChatManager):
    """SK's group chat manager, as SK means it to be extended (it ships only a round-robin one): `next_speaker`
    picks the agent, the chat ends once the reporter has spoken (or at `max_rounds`)."""

    async def should_request_user_input(self, chat_history: ChatHistory) -> BooleanResult:
        return BooleanResult(result=False, reason="The team works without the user.")

    async def should_terminate(self, chat_history: ChatHistory) -> BooleanResult:
        rounds = await super().should_terminate(chat_history)
        last = last_spoken(chat_history)
        if last is not None and last.name == "reporter":
            return BooleanResult(result=True, reason="The reporter has answered.")
        return rounds

    async def select_next_agent(self, chat_history: ChatHistory, participant_descriptions: dict[str, str]) -> StringResult:
        agent, reason = next_speaker(last_spoken(chat_history))
        return StringResult(result=agent, reason=reason)

    async def filter_results(self, chat_history: ChatHistory) -> MessageResult:
        return MessageResult(result=chat_history.messages[-1], reason="The chat's last message.")


class LedgerPlugin:
    """The analyst's `ledger` plugin: `query_ledger` and `calculate` over the task's ledger."""

    def __init__(self, ledger: list[dict[str, Any]]) -> None:
        self.ledger = ledger

    @kernel_function(name="query_ledger", description="An aggregate of the expense ledger's amounts over the rows "
                     "that match the filters (each filter a value, or 'all').")
    def query_ledger(self, metric: Annotated[str, "sum, count, mean, max or min"],
                     department: Annotated[str, f"{', '.join(DEPARTMENTS)} or all"] = "all",
                     quarter: Annotated[str, f"{', '.join(QUARTERS)} or all"] = "all",
                     category: Annotated[str, f"{', '.join(CATEGORIES)} or all"] = "all") -> str:
        refused = check_filters(department, quarter, category, metric)
        return refused or query_text(self.ledger, figure(metric, department, quarter, category))

    @kernel_function(name="calculate", description="The value of an arithmetic expression (numbers, parentheses and "
                     "+ - * /), to 2 decimals.")
    def calculate(self, expression: Annotated[str, "e.g. (120.50 - 80) / 80 * 100"]) -> str:
        return calculate(expression)
