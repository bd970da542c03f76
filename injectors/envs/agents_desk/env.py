"""`agents_desk`: a customer-support desk on the real OpenAI Agents SDK, on simulated models.

The team is the OpenAI Agents SDK (`openai-agents`, the `frameworks` extra)
running unchanged:

- **Triage** (`Agent` with the function tool `verify_customer` and two SDK
  handoffs) checks that the sender owns the order and hands the case to a
  specialist with a case note, or declines;
- **Refunds Specialist** (`lookup_order`, `get_policy`, `issue_refund`,
  `issue_store_credit`, `add_case_note`) resolves damaged-item refunds,
  returns and late-delivery compensation;
- **Orders Specialist** (`lookup_order`, `update_order`, `add_case_note`)
  changes orders that have not shipped;
- **Request Screen**, the agent behind Triage's input guardrail
  (`InputGuardrail`, run before Triage), says whether the message is a store
  support request; a tripwire ends the run.

Every agent has `output_type=Resolution` (structured output), its own
`OpenAIChatCompletionsModel` and `AsyncOpenAI` client with a per-agent base
URL `/agent/<slug>/v1`, served in-process by a `middleware.replay.endpoint.ChatProxy`
over the run's `replay.Session` (an `httpx.MockTransport`; no socket). The
proxy's upstream is `agents_policy.DeskPolicy`, which reads each request as
the SDK sends it. The function tools run over the task's simulated store
(`agents_store.Store`), which logs every verification and write.

Steps: one per model reply (the guardrail's verdict, a tool call, a handoff,
the final resolution), each made by one recorded call (`Runtime.step_calls`),
and one `tool_result` step, with no call, after each function tool call that
ran. The task succeeds when the store's writes are exactly the correct ones,
each made after the order's owner was verified, and the final resolution
reports the right kind, order and amount.
"""

from __future__ import annotations

import copy
import json
import random
from decimal import Decimal
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from .mistakes import MUTATORS
from .policy import HANDOFF, SLUGS, DeskPolicy
from .world import CATALOGUE, FAMILIES, Store, make_task, money, resolve, unverified_writes, writes
from .wire import completion, tool_call_of
from ..tool_steps import StepLog
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, family_tasks

FRAMEWORK = "openai-agents"
MAX_TURNS = 20
NAMES = {slug: name for slug, name in SLUGS.items()}
SLUG_OF = {name: slug for slug, name in SLUGS.items()}

DESCRIPTIONS = {
    "Triage": "Verifies that the customer owns the order and hands the case to the right specialist.",
    "Refunds Specialist": "Resolves damaged-item refunds, returns and late-delivery compensation by the store's policy.",
    "Orders Specialist": "Changes the items of orders that have not shipped.",
    "Request Screen": "The input guardrail: says whether a message is a store support request.",
}

INSTRUCTIONS = {
    "Triage": ("You are the triage agent of an online store's support desk. Read the customer's message, check with "
               "verify_customer that the email they wrote from owns the order, and decline politely if it does not. "
               "Otherwise hand the case to the Refunds Specialist (damaged items, returns, late delivery) or the Orders "
               "Specialist (changes to an order), with a case note of 'Key: value' lines: Case, Order, Item, Quantity, "
               "Condition, New quantity (as they apply)."),
    "Refunds Specialist": ("You are the refunds specialist. Work from the triage agent's case note. Look the order up, "
                           "read the store's policy on the case with get_policy, compute the amount exactly as the "
                           "policy says from the order's figures, issue it (issue_refund or issue_store_credit), record "
                           "a case note with add_case_note and report the resolution. Decline when the policy says no."),
    "Orders Specialist": ("You are the orders specialist. Work from the triage agent's case note. Look the order up; if it "
                          "is still processing, change the item's quantity with update_order (by SKU, by the "
                          "difference in units), record a case note with add_case_note and report the new item subtotal. Decline if it has shipped."),
    "Request Screen": ("You are the request screen of an online store's support desk. Say whether the message is a "
                       "support request about the store's orders (is_store_request) and why."),
}

_OBJ = {"type": "object", "additionalProperties": False}
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "verify_customer": ("Check that an email address is the one on an order.",
                        {**_OBJ, "properties": {"order_id": {"type": "string"}, "email": {"type": "string"}},
                         "required": ["order_id", "email"]}),
    "lookup_order": ("An order's items, prices, status and dates, and today's date.",
                     {**_OBJ, "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
    "get_policy": ("The store's policy on a topic: damaged_items, returns, late_delivery or order_changes.",
                   {**_OBJ, "properties": {"topic": {"type": "string"}}, "required": ["topic"]}),
    "issue_refund": ("Refund an amount (in dollars) of an order to the original payment method.",
                     {**_OBJ, "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"},
                                             "reason": {"type": "string"}}, "required": ["order_id", "amount", "reason"]}),
    "issue_store_credit": ("Give store credit (in dollars) for an order.",
                           {**_OBJ, "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"},
                                                   "reason": {"type": "string"}}, "required": ["order_id", "amount", "reason"]}),
    "update_order": ("Change the quantity of an item (by SKU) of an order that is still processing by a number of "
                     "units: positive adds units, negative removes them.",
                     {**_OBJ, "properties": {"order_id": {"type": "string"}, "sku": {"type": "string"},
                                             "change": {"type": "integer"}}, "required": ["order_id", "sku", "change"]}),
    "add_case_note": ("Record an internal note of what was done on an order.",
                      {**_OBJ, "properties": {"order_id": {"type": "string"}, "note": {"type": "string"}},
                       "required": ["order_id", "note"]}),
}
AGENT_TOOLS = {
    "Triage": ("verify_customer",),
    "Refunds Specialist": ("lookup_order", "get_policy", "issue_refund", "issue_store_credit", "add_case_note"),
    "Orders Specialist": ("lookup_order", "update_order", "add_case_note"),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "PL.1": "no agent writes a plan: the triage agent routes one case and each specialist follows its fixed procedure",
    "PL.2": "no agent writes a plan that could rely on missing tools or data",
    "PL.3": "each agent handles one case in a few turns; there is no longer goal to drift from",
    "V.3": "tool results come from the simulated store inside the run (no recorded call to replace), and a store error "
           "is answered by a retry",
    "C.3": "specialists take the triage note as their brief by design; where they act on a wrong note the wrong step "
           "is the note (C.2) or a tool call, which C.3 does not apply to",
}


@register
class AgentsDesk(FrameworkEnvironment):
    name = "agents_desk"
    stands_in_for = "retail customer service under policies (tau-bench retail)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("agents",)
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name=n, role="guardrail" if n == "Request Screen" else "agent", description=d)
              for n, d in DESCRIPTIONS.items()]
    tools = {}
    description = ("An OpenAI Agents SDK support desk (triage with an input guardrail, handoffs to refunds and orders "
                   "specialists with function tools over a simulated store) resolving customer requests.")
    not_applicable = NOT_APPLICABLE

    def tasks(self, seed: int, n: int) -> list[Task]:
        def make(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
            question, store = make_task(rng, family)
            want = resolve(store)
            ref = want.kind if want.kind == "declined" else f"{want.kind} {money(want.amount)} on {store['request']['order_id']}"
            return question, ref, {"store": store}

        return family_tasks(self.name, seed, n, FAMILIES, make)

    def system_prompt(self, agent: str, task: Task) -> str:
        return INSTRUCTIONS[agent]

    def policy(self) -> DeskPolicy:
        return DeskPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [[n for _, n, _ in CATALOGUE], [s for s, _, _ in CATALOGUE], ["opened", "unopened"]]
        if task is not None:
            groups.append([o["order_id"] for o in task.metadata["store"]["orders"]])
        return groups

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def injected_response(self, record: CallRecord, text: str) -> Any:
        return completion(record.request, text)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        want = resolve(task.metadata["store"])
        try:
            run = json.loads(answer or "")
        except json.JSONDecodeError:
            run = {"output": None, "log": [], "error": "no run record"}
        out, log = run.get("output") or {}, run.get("log") or []
        problems = []
        if run.get("error"):
            problems.append(f"the run ended with {run['error']}")
        if [tuple(w) for w in writes(log)] != list(want.writes):
            problems.append(f"store writes {writes(log)} where {list(want.writes)} were right")
        if unverified_writes(log):
            problems.append(f"wrote to {', '.join(unverified_writes(log))} before verifying the customer")
        oid = task.metadata["store"]["request"]["order_id"]
        if not problems and (out.get("resolution"), out.get("order_id")) != (want.kind, oid):
            problems.append(f"reported {out.get('resolution')!r} on {out.get('order_id')!r} where {want.kind!r} on {oid!r} was right")
        if not problems:
            try:
                amount = Decimal(str(out.get("amount")))
            except ArithmeticError:
                amount = Decimal(-1)
            if abs(amount - want.amount) > Decimal("0.005"):
                problems.append(f"reported an amount of {out.get('amount')} where {want.amount} was right")
            elif want.kind != "declined" and money(want.amount) not in str(out.get("message")):
                problems.append(f"the reply to the customer does not state {money(want.amount)}")
        ok = not problems
        return Outcome(success=ok, score=float(ok), evaluator="agents_desk:resolution",
                       detail="; ".join(problems) or f"resolved: {task.reference_answer}")

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("the OpenAI Agents SDK"):
            import agents as sdk
            from agents.exceptions import AgentsException
            from openai import AsyncOpenAI
            from pydantic import BaseModel
        endpoint = self.simulated_endpoint(rt, completion)

        class Resolution(BaseModel):
            resolution: str
            order_id: str
            amount: float
            message: str

        class Screen(BaseModel):
            is_store_request: bool
            reason: str

        store = Store(copy.deepcopy(task.metadata["store"]))
        sdk.set_default_openai_api("chat_completions")

        def model(name: str) -> Any:
            client = AsyncOpenAI(api_key="faultlens-sim", base_url=BASE_URL.format(agent=SLUG_OF[name]), max_retries=0,
                                 http_client=endpoint.async_client())
            return sdk.OpenAIChatCompletionsModel(model=rt.model, openai_client=client)

        def tool(name: str) -> Any:
            async def invoke(ctx: Any, arguments: str) -> str:
                return store.call(name, arguments, ctx.tool_call_id)

            description, schema = TOOLS[name]
            return sdk.FunctionTool(name=name, description=description, params_json_schema=schema, on_invoke_tool=invoke)

        def agent(name: str, **kw: Any) -> Any:
            return sdk.Agent(name=name, instructions=rt.system(name), model=model(name), output_type=kw.pop("output_type", Resolution),
                             tools=[tool(t) for t in AGENT_TOOLS.get(name, ())], **kw)

        screen = agent("Request Screen", output_type=Screen)

        async def screened(ctx: Any, _agent: Any, message: Any) -> Any:
            verdict = await sdk.Runner.run(screen, message, context=ctx.context)
            return sdk.GuardrailFunctionOutput(output_info=verdict.final_output,
                                               tripwire_triggered=not verdict.final_output.is_store_request)

        specialists = [agent("Refunds Specialist"), agent("Orders Specialist")]
        triage = agent("Triage", handoffs=specialists,
                       input_guardrails=[sdk.InputGuardrail(guardrail_function=screened, name="store_request",
                                                            run_in_parallel=False)])
        output, error = None, None
        try:
            result = sdk.Runner.run_sync(triage, task.query, max_turns=MAX_TURNS,
                                         run_config=sdk.RunConfig(tracing_disabled=not _traced(), workflow_name=self.name))
            output = result.final_output.model_dump() if isinstance(result.final_output, BaseModel) else None
        except AgentsException as exc:  # the framework ended the run (bad output, unknown tool, tripwire, turns)
            endpoint.reraise()
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
        except Exception:
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt, store)
        return json.dumps({"output": output, "log": store.log, "error": error}, ensure_ascii=False)

    def _steps(self, rt: Runtime, store: Store) -> None:
        """One step per recorded call (a model reply), then the tool's result when a function tool ran."""
        steps = StepLog(rt)
        for index, call in enumerate(rt.session.calls):
            name = NAMES.get(call.agent, call.agent)
            tc = tool_call_of(call.response)
            tool_name = ((tc or {}).get("function") or {}).get("name")
            meta: dict[str, Any] = {}
            if name == "Request Screen":
                kind = StepKind.message
                meta = {"guardrail": "input"}
            elif tc is None:
                kind = StepKind.final_answer
            elif tool_name in HANDOFF.values():
                kind = StepKind.message
                meta = {"handoff": next(a for a, t in HANDOFF.items() if t == tool_name)}
            else:
                kind = StepKind.tool_call
            step = steps.reply(index, call, kind, agent=name, meta=meta)
            output = store.outputs.get(str((tc or {}).get("id"))) if kind == StepKind.tool_call else None
            if output is not None:
                steps.result(step, output)
        steps.close()


def _traced() -> bool:
    """Whether OpenInference's openai-agents instrumentation is on (then the SDK's tracing must stay on for it).

    Otherwise tracing is off per run: nothing is exported (the SDK's default exporter would send traces to OpenAI
    when an API key is set) and a run costs less.
    """
    try:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    except ImportError:
        return False
    return bool(OpenAIAgentsInstrumentor().is_instrumented_by_opentelemetry)
