"""Warm-start error injection for your own agents, through the record/replay/inject proxy.

The team below is plain OpenAI SDK code (no faultlens import in the agents):
a planner, a researcher and an analyst, each with its own base URL
`http://127.0.0.1:PORT/agent/<name>/v1`. faultlens only sits behind that URL.

1. record: the proxy forwards every call upstream (here the offline demo
   model `faultlens-demo/<agent>` through litellm) and records it; the run succeeds.
2. inject: the same program runs again; the proxy replays the recorded calls
   up to call T, answers call T with an error of mode R.3 (a number stated
   wrongly), and lets the rest run live. If the run now fails, the gold label
   (agent of call T, call T, R.3) is exact by construction.

    python examples/proxy_warm_start.py          # offline, no key
    python examples/proxy_warm_start.py --at 2   # inject at another call

The same works from any language: start `faultlens proxy --mode record
--recording run.json --upstream MODEL`, point the framework's OpenAI base URL
at it, then `faultlens proxy --mode inject --recording run.json --at T
--error-mode R.3 --upstream MODEL`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import click
import openai

from faultlens.demo import sim_llm
from faultlens.injectors.proxy_mistakes import chat_error
from faultlens.middleware.replay.endpoint import ChatProxy, litellm_upstream
from faultlens.middleware.replay.session import Recording
from faultlens.server.proxy_app import create_proxy_app
from faultlens.server.run import ServerThread

POPULATION = {"Rome": 2761, "Paris": 2103}
TASK = "What is the combined population of Rome and Paris?"


def ask(base: str, agent: str, content: str) -> str:
    client = openai.OpenAI(base_url=f"{base}/agent/{agent}/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(model=agent, messages=[{"role": "user", "content": content}])
    return reply.choices[0].message.content or ""


def run_team(base: str) -> str:
    """The user's agent program: plan, look up each city (a plain tool), state facts, answer."""
    plan = ask(base, "planner", TASK)
    lookups = [json.dumps({"city": c, "population_thousands": POPULATION[c]})
               for c in (line.split(":", 1)[1].strip() for line in plan.splitlines() if line.startswith("lookup:"))]
    facts = ask(base, "researcher", "\n".join(lookups))
    return ask(base, "analyst", facts)


def succeeded(answer: str) -> bool:
    return f"{sum(POPULATION.values())} thousand" in answer


@click.command()
@click.option("--at", default=1, show_default=True, help="The 0-based call that gets the error (0 planner, 1 researcher, 2 analyst).")
@click.option("--mode", "error_mode", default="R.3", show_default=True, help="Failure mode of the injected error.")
def main(at: int, error_mode: str) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sim_llm.register()
    upstream = litellm_upstream("faultlens-demo/{agent}")
    path = Path(tempfile.mkdtemp()) / "run.json"

    with ServerThread(create_proxy_app(ChatProxy.recorder(upstream, save_to=path))) as server:
        answer = run_team(server.url)
    print(f"recorded run: {answer!r} -> {'success' if succeeded(answer) else 'failure'} ({path})")

    override = chat_error(error_mode, seed=0)
    injector = ChatProxy.injector(Recording.loads(path.read_text()), at, override, upstream)
    with ServerThread(create_proxy_app(injector)) as server:
        answer = run_team(server.url)
    status = injector.status()
    print(f"injected run: {answer!r} -> {'success' if succeeded(answer) else 'failure'} "
          f"({status['replayed']} replayed, {status['overridden']} injected, {status['live']} live)")
    for label in override.injected:
        print(f"gold label: agent={label['agent']} call={label['index']} mode={label['mode']} ({label['reason']})")


if __name__ == "__main__":
    main()
