"""What the Magentic-One team and its simulated agents share: names, limits, which call is which, and the chat-completion wire format."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from faultlens.middleware.replay.session import CallRecord, canonical

from ..framework import message_text


FRAMEWORK = "autogen"
ORCHESTRATOR = "MagenticOneOrchestrator"  # its name in the chat (AutoGen's)
ORCHESTRATOR_AGENT = "orchestrator"  # its name as a faultlens agent and in its base URL
PARTICIPANTS = ("web_surfer", "coder", "executor")
MAX_TURNS = 16
MAX_STALLS = 1  # re-plan (AutoGen's outer loop) at the first turn that makes no progress
CODE = re.compile(r"```(?:python|py)\n(.*?)```", re.S)
REPLAN_HINT = "- The web surfer must open the report pages themselves; the search listing shows no figures."
LEDGER_HEAD = "\nWe are working to address the following user request"

DESCRIPTIONS = {
    "web_surfer": "Searches the company annual-report site and opens report pages; reports the figures it reads.",
    "coder": "Writes Python code that computes a requested value from given figures and prints it.",
    "executor": "Runs the Python code blocks the coder writes and shows their output.",
}

# Markers of the orchestrator's requests (AutoGen's prompts, `_magentic_one/_prompts.py`).
_ORCH_KINDS = (("facts", "answer the following pre-survey"), ("plan", "devise a short bullet-point plan"),
               ("ledger", "Please output an answer in pure JSON format"),
               ("final", "provide the final answer to the original request"),
               ("facts", "Please rewrite the following fact sheet"), ("plan", "come up with a new plan"))

MODEL_INFO = {"vision": False, "function_calling": True, "json_output": False, "structured_output": False,
              "family": "unknown"}


def orchestrator_kind(request: dict[str, Any]) -> str:
    """Which of the orchestrator's prompts a request ends with (facts, plan, ledger, final)."""
    messages = request.get("messages") or []
    last = message_text(messages[-1].get("content")) if messages else ""
    for kind, marker in _ORCH_KINDS:
        if marker in last:
            return kind
    return "other"


def call_kind(call: CallRecord) -> str:
    """What a recorded call was: facts, plan, instruct (a ledger naming a speaker), satisfied (a ledger that ends
    the run), final; or `<participant>:tools` / `<participant>:text`."""
    message = call.response["choices"][0]["message"]
    if call.agent != ORCHESTRATOR_AGENT:
        return f"{call.agent}:{'tools' if message.get('tool_calls') else 'text'}"
    kind = orchestrator_kind(call.request)
    if kind != "ledger":
        return kind
    try:
        ledger = json.loads(message.get("content") or "")
        if ledger["is_request_satisfied"]["answer"]:
            return "satisfied"
        # With MAX_STALLS = 1 a ledger that sees no progress sends AutoGen to re-plan: no instruction follows it.
        return "instruct" if ledger["is_progress_being_made"]["answer"] else "stall"
    except (ValueError, KeyError, TypeError):
        return "unparsed"


def is_error_output(text: str) -> bool:
    return "Traceback (most recent call last)" in text or bool(re.search(r"^\w*Error: ", text, re.M))


def tool_call_text(calls: list[dict[str, Any]]) -> str:
    return "\n".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)


_CALL_LINE = re.compile(r"^(\w+)\((\{.*\})\)$")


def read_tool_calls(text: str) -> list[tuple[str, str]] | None:
    """The (name, arguments JSON) of each `name({...})` line of a tool-call step, or None if a line is not one."""
    out = []
    for line in text.strip().splitlines():
        m = _CALL_LINE.match(line.strip())
        if m is None:
            return None
        out.append((m.group(1), m.group(2)))
    return out or None


def completion_of(request: dict[str, Any], reply: str | list[tuple[str, str]]) -> dict[str, Any]:
    """A chat completion carrying text, or tool calls `[(name, arguments JSON)]` (ids from the request, stable)."""
    prompt = sum(len(message_text(m.get("content"))) for m in request.get("messages") or []) // 4
    if isinstance(reply, str):
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        finish, used = "stop", len(reply) // 4
    else:
        digest = hashlib.sha256(canonical(request.get("messages")).encode()).hexdigest()[:12]
        message = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": f"call_{digest}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                                  for i, (n, a) in enumerate(reply)]}
        finish, used = "tool_calls", sum(len(a) for _, a in reply) // 4
    return {"object": "chat.completion", "created": 0, "model": str(request.get("model", "")),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": used, "total_tokens": prompt + used}}
