"""The demo's multi-agent team: plain Python agents and a tool, traced with faultlens decorators.

planner → researcher (lookup_population tool) → analyst. Every model call
goes through litellm (offline: the `faultlens-demo` provider of
`examples/sim_llm.py`; any litellm model works, see `CityTeam(models=...)`).

The team has one realistic weakness: when a lookup fails, the researcher does
not say so, and the analyst adds up what it was given. A task naming a city
the table does not know by that name therefore fails, and the failed trace
shows where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import litellm

from faultlens.middleware import Outcome, Task, Trace, Tracer

# Populations in thousands (city proper, rounded). Munich is filed under its German name.
POPULATION_THOUSANDS = {"Paris": 2102, "Berlin": 3755, "Madrid": 3332, "Rome": 2761, "München": 1488, "Vienna": 1982}

TASKS = [
    Task(id="demo-ok", query="What is the combined population of Paris and Berlin, in thousands?", reference_answer="5857"),
    Task(id="demo-fail", query="What is the combined population of Rome and Munich, in thousands?", reference_answer="4249"),
]

SYSTEM = {
    "planner": "You plan city lookups. Answer with one line 'lookup: CITY' per city in the task.",
    "researcher": "You turn lookup results (one JSON object per line) into a list of facts.",
    "analyst": "You answer the task from the facts. Give the number in thousands.",
}


def evaluate(task: Task, answer: str) -> Outcome:
    """Success when the reference number appears in the answer."""
    ok = task.reference_answer is not None and task.reference_answer in answer.replace(",", "")
    return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator="reference number in answer", detail=f"expected {task.reference_answer}, answered: {answer}")


@dataclass
class CityTeam:
    """The team, bound to a tracer. `models` maps an agent to a litellm model name."""

    tracer: Tracer
    models: dict[str, str] = field(default_factory=lambda: {a: f"faultlens-demo/{a}" for a in SYSTEM})

    def __post_init__(self) -> None:
        t = self.tracer
        self.lookup_population = t.tool(name="lookup_population", description="population of a city, in thousands")(self._lookup_population)
        self.planner = t.agent(name="planner", role="splits the task into lookups")(self._planner)
        self.researcher = t.agent(name="researcher", role="looks the cities up")(self._researcher)
        self.analyst = t.agent(name="analyst", role="computes and states the answer", output=False)(self._analyst)

    def _chat(self, agent: str, content: str) -> str:
        response = litellm.completion(
            model=self.models[agent], messages=[{"role": "system", "content": SYSTEM[agent]}, {"role": "user", "content": content}]
        )
        return response.choices[0].message.content or ""

    def _lookup_population(self, city: str) -> dict:
        if city not in POPULATION_THOUSANDS:
            return {"error": f"no entry for {city!r}"}
        return {"city": city, "population_thousands": POPULATION_THOUSANDS[city]}

    def _planner(self, task: str) -> list[str]:
        reply = self._chat("planner", task)
        return [line.split(":", 1)[1].strip() for line in reply.splitlines() if line.startswith("lookup:")]

    def _researcher(self, cities: list[str]) -> str:
        results = [self.lookup_population(city) for city in cities]
        return self._chat("researcher", "\n".join(json.dumps(r) for r in results))

    def _analyst(self, task: str, facts: str) -> str:
        answer = self._chat("analyst", f"Task: {task}\n{facts}")
        self.tracer.final_answer(answer)
        return answer

    def solve(self, task: Task) -> Trace:
        """Run the team on one task inside a traced run; returns the stored trace."""
        with self.tracer.run(task=task, agents=list(SYSTEM), name="city-team") as run:
            cities = self.planner(task.query)
            facts = self.researcher(cities)
            answer = self.analyst(task.query, facts)
            outcome = evaluate(task, answer)
            run.record_outcome(success=outcome.success, score=outcome.score, detail=outcome.detail, evaluator=outcome.evaluator)
        return self.tracer.store.get_trace(run.id)
