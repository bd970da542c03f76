"""Your own LangGraph + litellm team, made re-runnable in a few lines, so `counterfactual` verifies who failed.

The team answers "what does this basket cost?": a ``planner`` lists the items,
a ``price`` tool looks each one up, a ``calculator`` adds the line totals and a
``writer`` states the answer. Each agent is a LangGraph node calling a model
through litellm. The only faultlens lines are the ones marked ``# faultlens``:
`LitellmRerunner` records every model and tool call, and `counterfactual` re-runs
the failed run with one step regenerated at a time (the recorded prefix
replayed exactly, the rest continued live and judged) until one change makes
the answer right.

Offline, the model is `toy/shop`, a litellm custom provider defined below: at
temperature 0 its calculator forgets the last line of a basket (a consistent
slip, as real models have), and sampled at a higher temperature it adds
correctly. Use a real model with ``--model``, e.g. ``openai/gpt-4o-mini``.

    python examples/rerun_own_agent.py
    python examples/rerun_own_agent.py --model openai/gpt-4o-mini
"""

from __future__ import annotations

import re
import sys
from typing import TypedDict

import click

# faultlens before litellm: importing faultlens keeps litellm offline (its bundled model cost map, no fetch).
from faultlens.attributors import get
from faultlens.middleware import open_store
from faultlens.middleware.replay.rerunnable import LitellmRerunner

import litellm
from langgraph.graph import END, START, StateGraph

PRICES = {"apple": 2, "pear": 5, "melon": 7, "lemon": 1}
BASKET = "What do 3 apples, 4 pears and 2 melons cost together?"
MODEL = "toy/shop"


def right_total(question: str) -> int:
    return sum(int(n) * PRICES[item.rstrip("s")] for n, item in re.findall(r"(\d+) (\w+)", question))


def judge(question: str, answer: str) -> bool:  # faultlens: what a right answer is
    found = re.search(r"-?\d+", answer or "")
    return found is not None and int(found.group()) == right_total(question)


desk = LitellmRerunner("basket-desk", judge=judge)  # faultlens


@desk.tool(agent="researcher")  # faultlens: tool calls are recorded and replayed too
def price(item: str) -> int:
    return PRICES[item]


class State(TypedDict, total=False):
    question: str
    model: str
    items: list[tuple[int, str]]
    lines: str
    total: str
    answer: str


def ask(state: State, agent: str, instruction: str, content: str) -> str:
    reply = desk.completion(agent=agent, model=state["model"], temperature=0,  # faultlens: instead of litellm.completion
                            messages=[{"role": "system", "content": f"You are the {agent}. {instruction}"},
                                      {"role": "user", "content": content}])
    return reply.choices[0].message.content


def planner(state: State) -> State:
    text = ask(state, "planner", "List each item of the basket as '<count> <item>', one per line, singular item names.",
               state["question"])
    items = [(int(n), item) for n, item in re.findall(r"^(\d+) (\w+)$", text, re.M)]
    return {"items": items}


def researcher(state: State) -> State:
    lines = [f"{n} x {item} at {price(item)}" for n, item in state["items"]]
    return {"lines": "\n".join(lines)}


def calculator(state: State) -> State:
    return {"total": ask(state, "calculator", "Add up the line totals. Reply 'Total: <number>'.", state["lines"])}


def writer(state: State) -> State:
    return {"answer": ask(state, "writer", "State the basket's cost as 'Answer: <number>'.", state["total"])}


graph = StateGraph(State)
for name, node in [("planner", planner), ("researcher", researcher), ("calculator", calculator), ("writer", writer)]:
    graph.add_node(name, node)
graph.add_edge(START, "planner")
graph.add_edge("planner", "researcher")
graph.add_edge("researcher", "calculator")
graph.add_edge("calculator", "writer")
graph.add_edge("writer", END)
team = graph.compile()


def solve(question: str, model: str = MODEL) -> str:
    return team.invoke({"question": question, "model": model})["answer"]


class ToyShopModel(litellm.CustomLLM):
    """`toy/shop`: an offline stand-in for a model, good at everything but adding at temperature 0."""

    def completion(self, model, messages, *args, **kwargs):
        system, user = messages[0]["content"], messages[-1]["content"]
        temperature = float((kwargs.get("optional_params") or {}).get("temperature", 0) or 0)
        if system.startswith("You are the planner"):
            text = "\n".join(f"{n} {item.rstrip('s')}" for n, item in re.findall(r"(\d+) (\w+)", user))
        elif system.startswith("You are the calculator"):
            totals = [int(n) * int(p) for n, p in re.findall(r"(\d+) x \w+ at (\d+)", user)]
            text = f"Total: {sum(totals if temperature > 0 else totals[:-1])}"  # the slip: forgets the last line
        else:
            text = "Answer: " + (re.findall(r"-?\d+", user) or ["unknown"])[-1]
        return litellm.ModelResponse(model=model, choices=[{"message": {"role": "assistant", "content": text}}])


def register_toy_model() -> None:
    if not any(p.get("provider") == "toy" for p in litellm.custom_provider_map or []):
        litellm.custom_provider_map = [*(litellm.custom_provider_map or []), {"provider": "toy", "custom_handler": ToyShopModel()}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", default=MODEL, show_default=True, help="The team's litellm model (toy/shop runs offline).")
@click.option("--db", default=":memory:", show_default=True, help="Store to save the trace and its attribution in.")
def main(model: str, db: str) -> None:
    """Run the team once, and if it fails, find the step whose correction makes it succeed."""
    register_toy_model()
    desk.run = lambda question: solve(question, model)  # faultlens: the program the rerunner re-runs
    trace = desk.record(BASKET)  # faultlens: a live, recorded run
    for step in trace.steps:
        print(f"  {step.index}  {step.agent:<10} {step.kind.value:<12} {step.content.splitlines()[0][:70]}")
    print(f"outcome: {'success' if trace.outcome.success else 'failure'} ({trace.outcome.detail})")
    if trace.outcome.success:
        return
    # faultlens: verified by reruns; the mode is read from what the verified correction changed
    attribution = get("counterfactual", k=len(trace.steps), mode_from="correction").attribute(trace)
    store = open_store(db)
    store.save_trace(trace)
    store.save_attribution(attribution)
    for trial in attribution.details["trials"]:
        print(f"  rerun with step {trial['step']} regenerated: changed={trial.get('changed')} success={trial['success']}")
    verdict = "verified" if attribution.details["verified"] else "not verified"
    print(f"decisive step: {attribution.step} by {attribution.agent}, mode {attribution.mode} ({verdict}; "
          f"{attribution.cost.reruns} reruns)")


if __name__ == "__main__":
    sys.exit(main())
