"""`sql_desk`: text-to-SQL data questions on Haystack's `Agent`, a lead calling two agents as tools.

The team is Haystack (`haystack-ai`, the `frameworks` extra) running
unchanged: three `Agent` components, each on its own `OpenAIChatGenerator`:

- **lead** (tools: `schema_reader`, `sql_analyst`, `calculate`) writes a
  plan, has the schema read, asks the analyst for the figures with the
  schema, has `calculate` work out the plan's operation and answers with an
  `ANSWER:` line;
- **schema_reader** (tool: `read_schema`, the CREATE statements of the
  task's database) reports the tables, their columns and their keys;
- **sql_analyst** (tool: `run_sql`, a read-only query on the task's SQLite
  database, rows or the error as text) writes and runs one query a figure
  and reports the figures.

Both members are tools of the lead through Haystack's own agent-as-tool
(`ComponentTool(component=agent)`), as in `docs_team`, whose wiring this
reuses: the generators on the in-process endpoint (`/agent/<name>/v1`, an
`httpx.MockTransport` served by the run's `ChatProxy`; no socket), the
`Calculator` component and the OpenInference capture (`docs_team.tracing`).
Each run opens its own in-memory database (stdlib `sqlite3`) from the task.

Determinism: one tool call per reply and `tool_concurrency_limit=1`;
tool-call ids are hashes of the request (`agents_desk.wire`); the queries'
rows come in SQLite's order for the same data. Each agent's run is bounded
by its `max_agent_steps`.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from faultlens.middleware.model.trace import Outcome, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, answer_outcome, quiet_loggers, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import record_replies
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import ANALYST, SCHEMA_READER, TeamPolicy
from .world import CATEGORIES, CITIES, FAMILIES, MONTHS, TABLES, answer_of, connect, make_task, read_schema, run_sql

FRAMEWORK = "haystack"
MAX_AGENT_STEPS = 8  # Haystack's count of model calls per agent run (a seed run's lead makes 3 to 5)

DESCRIPTIONS = {
    "lead": "Plans, has the schema read, asks the analyst for the figures, computes with calculate and answers.",
    "schema_reader": "Reads the database schema and reports its tables, columns and the keys that join them.",
    "sql_analyst": "Writes and runs one read-only SQL query per figure it is asked for and reports the figures.",
}
INSTRUCTIONS = {
    "lead": ("You are the lead. Answer the data question from the shop's database. First write a plan (one numbered "
             "line per tool you will call, then the answer), then carry it out line by line: have the schema_reader "
             "read the schema, ask the sql_analyst for the figures with the schema, compute with calculate where the "
             "question needs it, and end with a line 'ANSWER: <value>'."),
    "schema_reader": ("You are the schema_reader. Read the database schema with read_schema and reply with one line per "
                      "table: '<table>: <column>, <column> -> <table>.<column>, ...' (an arrow marks a key to another "
                      "table)."),
    "sql_analyst": ("You are the sql_analyst. For each figure you are asked for, write one read-only SQLite query from "
                    "the schema you are given, run it with run_sql, take the figure from its first row, and reply with "
                    "one line per figure: '<figure>: <value>'. Text values are stored in lower case."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.2": "no agent checks another's output: the lead takes the analyst's figures as reported, and the analyst's "
           "only check (an empty result queried again) is in seeds with a recovered mistake alone",
    "V.3": "tool results come from the task's SQLite database and the calculator inside the run (no recorded call to "
           "replace), and a refused calculation is written again",
}


@register
class SqlDesk(ToolCallingTeam):
    name = "sql_desk"
    stands_in_for = "text-to-SQL over a database (BIRD, Spider)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("haystack",)
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("A Haystack Agent (the lead, with a calculator) that calls a schema_reader Agent and an sql_analyst "
                   "Agent as tools (ComponentTool); the analyst runs read-only SQL on the task's SQLite database.")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = TeamPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        """The last `ANSWER:` value: the reference number, or the reference name (case and spacing aside)."""
        return answer_outcome(answer, task.reference_answer or "", f"{self.name}:value", same_value)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(CITIES), [c.capitalize() for c in CITIES], list(CATEGORIES), [str(m) for m in MONTHS],
                  *[list(names) for names in TABLES.values()]]
        if task is not None:  # the task's own values first among equals: a rule swaps in one the database holds
            rows = task.metadata["world"]["rows"]
            groups += [[r[1] for r in rows["customers"]], sorted({r[2] for r in rows["customers"]}),
                       sorted({r[2] for r in rows["products"]})]
        return groups

    def injected_response(self, record: CallRecord, text: str) -> Any:
        return completion(record.request, text)

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"  # before the import: Haystack would post usage events
        with self.framework_imports("Haystack"):
            import httpx
            from haystack import Pipeline
            from haystack.components.agents import Agent
            from haystack.components.generators.chat import OpenAIChatGenerator
            from haystack.dataclasses import ChatMessage
            from haystack.tools import ComponentTool, Tool
            from haystack.utils import Secret

            from ..docs_team.components import Calculator
        quiet_loggers("haystack.components.agents.tool_calling")
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        db = connect(task.metadata["world"])

        def generator(agent: str) -> Any:
            return OpenAIChatGenerator(api_key=Secret.from_token("faultlens-sim"), model=rt.model,
                                       api_base_url=BASE_URL.format(agent=agent), max_retries=0,
                                       http_client_kwargs={"transport": httpx.MockTransport(endpoint.handle)})

        schema_tool = Tool(name="read_schema", description="The CREATE statement of every table of the database.",
                           parameters={"type": "object", "properties": {}}, function=lambda: read_schema(db))
        sql_tool = Tool(name="run_sql", description="Run one read-only SQLite query; its rows (or the error) as text.",
                        parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                        function=lambda query: run_sql(db, query))
        calc = ComponentTool(component=Calculator(), name="calculate", description="The value of an arithmetic "
                             "expression (numbers and + - * /).", outputs_to_string={"source": "value"})
        member_runs: list[list[Any]] = []  # the members' messages of each of their runs

        def report(result: dict[str, Any]) -> str:
            member_runs.append(list(result.get("messages") or []))
            last = result.get("last_message")
            return (last.text or "") if last is not None else ""

        def member(name: str, tool: Any) -> Any:
            agent = Agent(chat_generator=generator(name), tools=[tool], system_prompt=rt.system(name),
                          max_agent_steps=MAX_AGENT_STEPS, tool_concurrency_limit=1)
            return ComponentTool(component=agent, name=name, description=DESCRIPTIONS[name],
                                 outputs_to_string={"handler": report})

        lead = Agent(chat_generator=generator("lead"), tools=[member(SCHEMA_READER, schema_tool),
                                                              member(ANALYST, sql_tool), calc],
                     system_prompt=rt.system("lead"), max_agent_steps=MAX_AGENT_STEPS, tool_concurrency_limit=1)
        answer: str | None = None
        lead_messages: list[Any] = []
        try:
            # in a Pipeline, as Haystack runs components (and as its OpenInference instrumentation traces them)
            pipeline = Pipeline()
            pipeline.add_component("lead", lead)
            result = pipeline.run({"lead": {"messages": [ChatMessage.from_user(task.query)]}})["lead"]
            lead_messages = list(result.get("messages") or [])
            last = result.get("last_message")
            answer = last.text if last is not None and last.text and not last.tool_calls else None
        except Exception:  # the framework ended the run (a bad tool call it raised on) or a drift
            endpoint.reraise()
            raise
        finally:
            db.close()
        endpoint.reraise()
        outputs = {str(r.origin.id): str(r.result) for messages in [lead_messages, *member_runs]
                   for m in messages for r in m.tool_call_results}
        self._steps(rt, outputs)
        return answer

    def _steps(self, rt: Runtime, outputs: dict[str, str]) -> None:
        """One step per recorded call, then the tool's result after a tool call: the lead's first call of a member is
        its `plan`, a later one a `message` (metadata `delegate`); a member's reply with no tool call is its report (a
        `message`), the lead's its `final_answer`."""
        planned = False

        def classify(call: CallRecord, tc: dict[str, Any] | None) -> tuple[StepKind, dict[str, Any]]:
            nonlocal planned
            tool = (tc or {}).get("function", {}).get("name")
            if call.agent == "lead" and tc is not None and (tool in (SCHEMA_READER, ANALYST) or not planned):
                kind = StepKind.message if planned else StepKind.plan
                planned = True
                return kind, {"delegate": tool}
            if tc is not None:
                return StepKind.tool_call, {}
            return (StepKind.final_answer if call.agent == "lead" else StepKind.message), {}

        record_replies(rt, outputs, classify)


def same_value(given: str, reference: str) -> bool:
    """A number equal to the reference, or the reference name (case and spacing aside)."""
    try:
        return abs(float(given.replace(",", "")) - float(reference)) < 1e-6
    except ValueError:
        return " ".join(given.split()).casefold() == " ".join(reference.split()).casefold()
