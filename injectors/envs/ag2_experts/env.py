"""`ag2_experts`: a real AG2 group chat of experts with a code executor, on simulated models.

The team is AG2 (`ag2[openai]==0.14.0`, the `frameworks` extra) running
unchanged, in the style of CaptainAgent's expert teams:

- **executor**, a `UserProxyAgent` with a `LocalCommandLineCodeExecutor`
  (in a per-task temporary folder), asks the question and runs every
  ```` ```python ```` block it is shown (no model call);
- **planner**, an `AssistantAgent`, writes a three-line plan whose first line
  tells the coder what to compute, then reports the printed value as
  `ANSWER: <value>` and `TERMINATE`;
- **coder**, an `AssistantAgent`, writes the Python for the plan's first line;
- the `GroupChatManager` picks each next speaker with AG2's `auto` speaker
  selection (a model call of its own, "You are in a role play game...").

Every model call of the framework goes over its OpenAI client to an
in-process `middleware.replay.endpoint.ChatProxy` (a per-agent base URL
`/agent/<name>/v1`, served through an `httpx.MockTransport`, so nothing opens
a socket) whose session is the run's `replay.Session`: record, replay and
injection are the proxy's. The proxy's upstream is the simulated policy
below, which reads each request exactly as AG2 sends it (the speaker-selection
prompt and its `checking_agent` re-asks, the agents' system messages, the
named transcript) and answers as a competent agent would.

Steps and calls: a step is one message of the group chat after the question
(planner and coder messages have one model call each, executor messages have
none), and speaker-selection calls are control calls that are no step. The
run says which call made which step (`Runtime.step_calls`), so injection at
step t replaces the response of that step's call, and steps with no call are
not injection candidates.

The planner takes the other experts at their word: a coder message that says
what its code printed, without a code block, is reported as the answer, and a
coder that hands the computation back gets the planner's own (mental, so
approximate) value. Neither happens in a seed run; they are how this team
carries an A.3 or C.1 mistake to the end, as a real LLM team does.

The executor runs code with this interpreter isolated (`python -I -S` through
a one-line shim in the executor's virtual-env `bin_path`): the standard library
only, no site-packages, the same on every machine, and cheaper to start than
the venv's interpreter. The run's `RunResult.native_log` is AG2's own record of
the chat, `GroupChatManager.messages_to_string` per message (one JSON line
each).

Recovered mistakes in seeds (rate `noise`): the coder's first version misspells
a name and crashes, the executor shows the traceback, the coder rewrites it;
or the speaker selector names two roles and AG2 re-asks it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, Step, StepKind, Task
from faultlens.middleware.replay.session import canonical

from faultlens.injectors.generators import perturb_number
from .. import register
from .mistakes import MUTATORS
from .tasks import FAMILIES, Spec, answer_of, code_for, make_task, read_question, read_spec, spec_line
from ..base import Runtime, stable_seed
from ..framework import (ANSWER_LINE, BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, family_tasks,
                        message_text, numeric_outcome)

MANAGER = "chat_manager"
MAX_ROUND = 14
FRAMEWORK = "ag2"
_CODE = re.compile(r"```(?:python|py)\n(.*?)```", re.S)
_SELECT_TAIL = "Read the above conversation. Then select the next role from"
# A coder's message that states a printed value without a code block, and one that hands the computation back.
_CLAIM = re.compile(r"it printed (-?\d[\d,]*(?:\.\d+)?)")
_HANDOFF = "planner: please give the value directly"

DESCRIPTIONS = {
    "executor": "Runs the Python code blocks it is given and reports the exit code and output. Asks the question.",
    "planner": "Plans the work, checks the executed result and reports the final answer.",
    "coder": "Writes Python code that computes what the plan asks for and prints the result.",
}


def estimate(question: str) -> str | None:
    """The planner's value worked out without code: near the true value, not it (mental arithmetic at this size)."""
    spec = read_question(question)
    if spec is None:
        return None
    true = answer_of(spec)
    return perturb_number(true, random.Random(stable_seed("ag2-estimate", question)))


def executor_result(content: str) -> tuple[bool, str] | None:
    """(succeeded, output) of an executor message, or None if it is not one."""
    m = re.match(r"exitcode: (\d+) \([^)]*\)\nCode output: ?(.*)", content, re.S)
    if m is None:
        return None
    return m.group(1) == "0", m.group(2).strip()


class Ag2Policy:
    """The simulated experts and speaker selector: a function of the request AG2 sends (and the sim settings)."""

    agents = ("executor", "planner", "coder")

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages = [dict(m, content=message_text(m.get("content"))) for m in request.get("messages") or []]
        key = canonical([m["content"] for m in messages])

        def chance(label: str) -> bool:
            noise = float(sim.get("noise", 0.0))
            seed = stable_seed(sim.get("seed", 0), agent, key, label)
            return noise > 0 and (seed % 10_000) / 10_000 < noise

        if agent == MANAGER:
            return self.select(messages, chance)
        if agent == "planner":
            return self.plan_or_report(messages)
        if agent == "coder":
            return self.code(messages, chance)
        raise ValueError(f"ag2_experts: no simulated agent {agent!r}")

    # -- the speaker selector -------------------------------------------------
    def select(self, messages: list[dict[str, Any]], chance) -> str:
        transcript = [m for m in messages if m.get("name") in self.agents]
        last = messages[-1] if messages else {}
        requery = last.get("name") == "checking_agent" and not last["content"].startswith(_SELECT_TAIL)
        nxt = self.next_speaker(transcript)
        if not requery and chance("two-names"):
            other = "planner" if nxt != "planner" else "coder"
            return f"{nxt}, then {other}"  # two names: AG2 asks again
        return nxt

    @staticmethod
    def next_speaker(transcript: list[dict[str, Any]]) -> str:
        if len(transcript) <= 1:
            return "planner"
        last = transcript[-1]
        if last["name"] == "coder":
            return "executor" if _CODE.search(last["content"]) else "planner"
        if last["name"] == "executor":
            result = executor_result(last["content"])
            return "planner" if result is None or result[0] else "coder"
        return "coder"

    # -- the planner ----------------------------------------------------------
    def plan_or_report(self, messages: list[dict[str, Any]]) -> str:
        body = [m for m in messages if m.get("role") != "system"]
        question = body[0]["content"] if body else ""
        if not any(m.get("role") == "assistant" for m in body):
            spec = read_question(question)
            what = spec_line(spec) if spec else question
            return (f"Plan:\n1. coder: {what}; print the result.\n2. executor: run the code.\n"
                    "3. planner: check the printed value and report it as the answer.")
        last = body[-1]
        if last.get("name") == "coder" and not _CODE.search(last["content"]):
            # The planner takes the coder at its word (it is an expert); asked to give the value itself, it
            # works it out in its head, which for these sizes is an estimate.
            claimed = _CLAIM.search(last["content"])
            if claimed:
                value = claimed.group(1)
                return f"The coder reports that the code printed {value}.\nANSWER: {value}\nTERMINATE"
            if _HANDOFF in last["content"]:
                value = estimate(question)
                if value is not None:
                    return f"Working it out directly, the value is about {value}.\nANSWER: {value}\nTERMINATE"
        result = executor_result(last["content"]) if last.get("name") == "executor" else None
        if result is not None and result[0] and result[1]:
            value = result[1].splitlines()[-1].strip()
            return f"The code ran and printed {value}, which answers the question.\nANSWER: {value}\nTERMINATE"
        if result is not None:
            return "The code did not run cleanly. coder: please fix it and print the result."
        return "coder: please write the code for step 1 of the plan and print the result."

    # -- the coder ------------------------------------------------------------
    def code(self, messages: list[dict[str, Any]], chance) -> str:
        body = [m for m in messages if m.get("role") != "system"]
        question = body[0]["content"] if body else ""
        spec: Spec | None = None
        for m in reversed(body):
            if m.get("name") == "planner" and "1. coder:" in m["content"]:
                spec = read_spec(m["content"])
                break
        spec = spec or read_question(question)
        if spec is None:
            return "I cannot tell from the plan what to compute. planner: please restate step 1."
        written = [m for m in body if m.get("role") == "assistant"]
        last = body[-1] if body else {}
        failed = last.get("name") == "executor" and (executor_result(last["content"]) or (True, ""))[0] is False
        slip = not written and chance("slip")
        head = "Here is the corrected code." if failed else "Here is the code for step 1 of the plan."
        return f"{head}\n```python\n{code_for(spec, slip=slip)}\n```"


def _interpreter_dir() -> Path:
    """A folder whose `python` runs this interpreter isolated (`-I -S`): no site-packages, no user site, no PYTHON*
    variables. The experts' code needs only the standard library; an isolated start skips reading every .pth file of
    the venv's site-packages, and behaves the same on every machine (scripts/bench_ag2_run.py measures it)."""
    # One folder per interpreter: processes of two installs on one machine must not rewrite each other's shim.
    folder = Path(tempfile.gettempdir()) / "faultlens-ag2" / f"bin-{hashlib.sha256(sys.executable.encode()).hexdigest()[:12]}"
    shim = folder / "python"
    text = f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n'
    if not shim.exists() or shim.read_text() != text:
        folder.mkdir(parents=True, exist_ok=True)
        part = folder / f"python.{os.getpid()}"
        part.write_text(text)
        part.chmod(0o755)
        os.replace(part, shim)  # atomic: parallel workers never see half a file
    return folder


@register
class Ag2Experts(FrameworkEnvironment):
    name = "ag2_experts"
    stands_in_for = "number theory with code (MATH)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("autogen",)
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name=n, role="tool executor" if n == "executor" else "expert", description=d)
              for n, d in DESCRIPTIONS.items()]
    tools = {}
    description = "An AG2 group chat (planner, coder, code executor, auto speaker selection) answering questions that need code."
    not_applicable = {
        **TEXT_ONLY_NOT_APPLICABLE,
        "A.1": "the experts call no tools: their code goes to the executor, whose runs are no model calls to replace",
        "A.2": "the experts call no tools: their code goes to the executor, whose runs are no model calls to replace",
        "V.3": "the executor's output is made by the code, not by a model call, so there is no call to replace",
        "A.6": "a repeated message does not loop here: the speaker selection moves on and the next expert redoes the turn",
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        def make(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
            question, spec = make_task(rng, family)
            return question, answer_of(spec), {}

        return family_tasks(self.name, seed, n, FAMILIES, make)

    def system_prompt(self, agent: str, task: Task) -> str:
        roles = {
            "planner": ("You are the planner of a team of experts (planner, coder, executor). First write a short plan "
                        "whose step '1. coder:' says exactly what to compute. When the executor has run the code, check "
                        "its output and reply with 'ANSWER: <value>' and then 'TERMINATE'."),
            "coder": ("You are the coder of a team of experts. Write one ```python block that computes what step 1 of "
                      "the plan asks for and prints only the result. If the executor reports a failure, fix the code."),
        }
        return roles[agent]

    def policy(self) -> Ag2Policy:
        return Ag2Policy()

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return numeric_outcome(answer, task.reference_answer or "", "ag2_experts:numeric")

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("AG2"):
            from autogen import AssistantAgent, GroupChat, GroupChatManager, LLMConfig, UserProxyAgent
            from autogen.coding import LocalCommandLineCodeExecutor
        endpoint = self.simulated_endpoint(rt)

        def llm(agent: str) -> Any:
            return LLMConfig({"model": rt.model, "api_key": "faultlens-sim", "api_type": "openai", "price": [0.0, 0.0],
                              "base_url": BASE_URL.format(agent=agent), "max_retries": 0, "http_client": endpoint.client()})

        # A fixed folder per task: tracebacks name the code file, and a replay must see the same text.
        work = Path(tempfile.gettempdir()) / "faultlens-ag2" / hashlib.sha256((task.id or task.query).encode()).hexdigest()[:16]
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        python = types.SimpleNamespace(bin_path=str(_interpreter_dir()))  # the `python` the executor finds first
        # Every expert's code ends in milliseconds; code changed by a generic error rule may loop, and then the
        # timeout is what it costs (AG2 reports it as exit code 124, and the coder rewrites the code).
        executor = UserProxyAgent("executor", human_input_mode="NEVER", llm_config=False, description=DESCRIPTIONS["executor"],
                                  code_execution_config={"executor": LocalCommandLineCodeExecutor(
                                      timeout=2, work_dir=work, virtual_env_context=python)})
        experts = [AssistantAgent(n, system_message=rt.system(n), llm_config=llm(n), description=DESCRIPTIONS[n])
                   for n in ("planner", "coder")]
        chat = GroupChat([executor, *experts], messages=[], max_round=MAX_ROUND, speaker_selection_method="auto")
        manager = GroupChatManager(chat, llm_config=llm(MANAGER),
                                   is_termination_msg=lambda m: "TERMINATE" in message_text(m.get("content")))
        # AG2 prints every turn (to stdout, and as INFO events); the run's record is the trace.
        for logger in ("autogen", "ag2"):
            logging.getLogger(logger).setLevel(logging.WARNING)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                executor.initiate_chat(manager, message=task.query)
        except Exception:
            endpoint.reraise()
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        endpoint.reraise()
        # AG2's own record of the chat: its saved state (`messages_to_string`, what `messages_from_string` resumes
        # from), one message per line.
        rt.native_log = "".join(manager.messages_to_string([m])[1:-1] + "\n" for m in chat.messages)
        return self._steps(chat.messages[1:], rt)

    def _steps(self, messages: list[dict[str, Any]], rt: Runtime) -> str | None:
        """One step per group-chat message after the question; each expert message is mapped to its model call."""
        calls = rt.session.calls
        pointer, answer = 0, None
        step_calls: list[int | None] = []
        for m in messages:
            agent, text = str(m.get("name")), message_text(m.get("content"))
            index = len(rt.steps)
            if agent == "executor":
                result = executor_result(text)
                rt.record_step(Step(index=index, agent=agent, kind=StepKind.tool_result, content=text, tool_name="python",
                                    tool_result=text, metadata={"role": "tool", "exit_ok": bool(result and result[0])}))
                step_calls.append(None)
                continue
            while pointer < len(calls) and calls[pointer].agent != agent:
                pointer += 1
            if pointer == len(calls):
                raise RuntimeError(f"ag2_experts: no model call of {agent!r} for message {index}")
            if ANSWER_LINE.search(text):
                kind, answer = StepKind.final_answer, text
            elif agent == "planner" and index == 0:
                kind = StepKind.plan
            else:
                kind = StepKind.message
            rt.record_step(Step(index=index, agent=agent, kind=kind, content=text, model=rt.model))
            step_calls.append(pointer)
            pointer += 1
        rt.step_calls = step_calls
        return answer
