"""What the environments on real agent frameworks share: an in-process OpenAI endpoint over the run's session.

A framework's OpenAI client gets a per-agent base URL
(`http://faultlens.invalid/agent/<name>/v1`) and an `httpx` client whose
transport is `InProcessEndpoint`: each request goes to a
`middleware.replay.endpoint.ChatProxy` over the run's `replay.Session` (so recording,
replay and injection are the proxy's), and nothing opens a socket. The
proxy's upstream is the environment's simulated policy,
`respond(agent, request, sim) -> text`.

Beside the endpoint: the team bases (`FrameworkTeam` declares its prompts,
simulated agents and error rules as data; `tool_calling.ToolCallingTeam` adds
tool-call replies and a numeric answer), what a simulated agent reads of a request
(`chat_turn`, `noise_chance`), and tasks and outcomes (`world_tasks`,
`numeric_outcome`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import random
import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, Task
from faultlens.middleware.replay.endpoint import ChatProxy
from faultlens.middleware.replay.session import CallRecord, Drift, Session, canonical

from .base import Environment, Runtime, stable_seed

# Failure modes a text-only task cannot show (the framework environments ask no images).
TEXT_ONLY_NOT_APPLICABLE = {
    "P.1": "the tasks carry no images, so there is nothing to perceive",
    "P.2": "the tasks carry no images, so there is nothing to ground",
    "P.3": "the tasks carry no images or rendered output to misread",
}

__all__ = ["BASE_URL", "FrameworkEnvironment", "FrameworkTeam", "InProcessEndpoint", "chat_turn", "completion",
           "message_text", "noise_chance", "routed_through", "team_agents", "world_tasks"]

# Wrappers of every in-process endpoint's upstream, innermost first (`routed_through`).
_ROUTES: list[Callable[[Callable[[str, dict[str, Any]], dict[str, Any]]], Callable[[str, dict[str, Any]], dict[str, Any]]]] = []


@contextlib.contextmanager
def routed_through(wrap: Callable[[Callable[[str, dict[str, Any]], dict[str, Any]]], Callable[[str, dict[str, Any]], dict[str, Any]]]) -> Iterator[None]:
    """Within the block, each framework run's upstream `(agent, request) -> completion` is `wrap(upstream)`:
    how a run's calls go through something in front of the simulated agents (the live gateway,
    `injectors.slipping_team`). The endpoints of the run keep the session's record/replay rules."""
    _ROUTES.append(wrap)
    try:
        yield
    finally:
        _ROUTES.remove(wrap)

BASE_URL = "http://faultlens.invalid/agent/{agent}/v1"
# `reply(request, answer)`: the chat completion the framework reads for the simulated agent's answer.
Reply = Callable[[dict[str, Any], Any], dict[str, Any]]


def message_text(content: Any) -> str:
    """A message's text, whether its content is a string or a list of parts (smolagents sends parts)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def completion(request: dict[str, Any], text: str) -> dict[str, Any]:
    """An OpenAI chat completion carrying `text` (token counts are character counts / 4, deterministic)."""
    prompt = sum(len(message_text(m.get("content"))) for m in request.get("messages") or []) // 4
    used = len(text) // 4
    return {"object": "chat.completion", "created": 0, "model": str(request.get("model", "")),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": used, "total_tokens": prompt + used}}


class InProcessEndpoint:
    """An `httpx` transport handler answering the framework's chat requests through a `ChatProxy`.

    A replayed request that differs from the recording is answered 409 (the
    framework then raises its own connection error); the `Drift` is kept in
    `drift` so the environment can raise it instead (see `reraise`).
    """

    def __init__(self, session: Session, respond: Callable[[str, dict[str, Any]], Any], reply: Reply | None = None) -> None:
        """`respond(agent, request)` gives the reply (text, or what `reply` reads); `reply(request, answer)` turns it
        into the completion the framework reads (default `completion`: text only; `agents_desk.wire.completion` for
        tool calls in the action form)."""
        answer = reply or completion
        self.proxy = ChatProxy(session, lambda agent, request: answer(request, respond(agent, request)))
        self.drift: Drift | None = None

    def handle(self, request: Any) -> Any:
        import httpx

        parts = request.url.path.strip("/").split("/")
        agent = parts[1] if len(parts) > 2 and parts[0] == "agent" else "model"
        if _ROUTES and not getattr(self, "_routed", False):
            upstream = self.proxy.upstream
            if upstream is not None:  # always set here (__init__); a replay-only proxy has none to route
                for wrap in _ROUTES:
                    upstream = wrap(upstream)
                self.proxy.upstream = upstream
            self._routed = True
        try:
            body = self.proxy.complete(agent, json.loads(request.content))
        except Drift as drift:
            self.drift = self.drift or drift
            return httpx.Response(409, json={"error": {"message": str(drift), "type": "faultlens_drift"}})
        return httpx.Response(200, content=canonical(body).encode(), headers={"content-type": "application/json"})

    def client(self) -> Any:
        """An `httpx.Client` whose requests go to this endpoint."""
        import httpx

        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def async_client(self) -> Any:
        """An `httpx.AsyncClient` whose requests go to this endpoint (for frameworks on async OpenAI clients)."""
        import httpx

        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))

    def reraise(self) -> None:
        """Raise the drift seen during the run, if any (call it when the framework's run ended or raised)."""
        if self.drift is not None:
            raise self.drift


class FrameworkEnvironment(Environment):
    """Base of environments on a real framework: responses are chat completions."""

    def injected_response(self, record: CallRecord, text: str) -> Any:
        """The recorded chat completion of the call with its message replaced by `text`."""
        response = copy.deepcopy(record.response) if record.response else completion(record.request, text)
        response["choices"][0]["message"]["content"] = text
        return response

    def require_simulated(self, rt: Runtime) -> None:
        """Refuse a run on real models: the team's prompts and rules are written for its simulated agents."""
        if not rt.model.startswith(self.sim_model()):
            raise ValueError(f"{self.name} runs on its simulated agents only (it has no --agent-model support yet)")

    @contextlib.contextmanager
    def framework_imports(self, framework: str) -> Iterator[None]:
        """Around `program`'s imports of the framework: a failed one says which extra brings `framework`."""
        try:
            yield
        except ImportError as exc:  # the optional extra is not installed
            raise RuntimeError(f"{self.name} needs {framework}: pip install 'faultlens[{self.extra}]'") from exc

    def simulated_endpoint(self, rt: Runtime, reply: Reply | None = None,
                           endpoint: type[InProcessEndpoint] = InProcessEndpoint) -> InProcessEndpoint:
        """The opening of `program`: refuse real models, then the run's in-process endpoint answered by the
        simulated agents (`policy().respond`, with the run's sim settings); `reply` as `InProcessEndpoint`'s."""
        self.require_simulated(rt)
        policy, sim = self.policy(), dict(rt.sim)
        return endpoint(rt.session, lambda agent, request: policy.respond(agent, request, sim), reply=reply)


class FrameworkTeam(FrameworkEnvironment):
    """A framework environment whose prompts, simulated agents and error rules are its package's data: set
    `instructions` (agent -> system prompt), `team_policy` (the simulated agents' class) and `rules` (`mutators`)."""

    instructions: ClassVar[dict[str, str]] = {}
    team_policy: ClassVar[type]
    rules: ClassVar[dict[str, list[Any]]] = {}

    def system_prompt(self, agent: str, task: Task) -> str:
        return self.instructions[agent]

    def policy(self) -> Any:
        return self.team_policy()

    def mutators(self) -> dict[str, list[Any]]:
        return self.rules


def quiet_loggers(*names: str) -> None:
    """Turn off these loggers of a framework in this process. They report the simulated agents' own mistakes (an
    injected call of a tool that does not exist), which the run's trace already holds, and would bury a build's
    progress bars. `disabled`, not a level: Agno sets its loggers' levels again on every run."""
    for name in names:
        logging.getLogger(name).disabled = True


def team_agents(descriptions: dict[str, str]) -> list[AgentInfo]:
    """A team's agents, in order, from `{name: description}` (each of role "agent")."""
    return [AgentInfo(name=n, role="agent", description=d) for n, d in descriptions.items()]


def noise_chance(sim: dict[str, Any], agent: str, key: str) -> Callable[[str], bool]:
    """`chance(label)`: whether a simulated agent makes its recovered mistake `label` on the request `key`, at the
    run's rate `sim["noise"]` (a function of the run's seed, the agent, the request and the label: replays agree)."""

    def chance(label: str) -> bool:
        noise = float(sim.get("noise", 0.0))
        return noise > 0 and (stable_seed(sim.get("seed", 0), agent, key, label) % 10_000) / 10_000 < noise

    return chance


def chat_turn(agent: str, request: dict[str, Any], sim: dict[str, Any]) -> tuple[list[dict[str, Any]], str, Callable[[str], bool]]:
    """What a simulated tool-calling agent reads of a chat request: its messages, its first user message's text and
    its `noise_chance` (keyed by the messages' contents and tool calls)."""
    messages = [dict(m) for m in request.get("messages") or []]
    key = canonical([[m.get("content"), m.get("tool_calls")] for m in messages])
    user = next((message_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    return messages, user, noise_chance(sim, agent, key)


# The last line of a team's answer that states the result: `ANSWER: <value>`.
ANSWER_LINE = re.compile(r"^ANSWER:\s*(.+?)\s*$", re.M)


def answer_outcome(answer: str | None, reference: str, evaluator: str, same: Callable[[str, str], bool]) -> Outcome:
    """Success when the answer's last `ANSWER:` value is `same(value, reference)`."""
    found = ANSWER_LINE.findall(answer or "")
    if not found:
        return Outcome(success=False, score=0.0, evaluator=evaluator, detail="no 'ANSWER:' line")
    given = found[-1]
    ok = same(given, reference)
    return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator=evaluator, detail=f"answered {given!r}, expected {reference!r}")


def _same_number(given: str, reference: str) -> bool:
    try:
        return abs(float(given.replace(",", "")) - float(reference)) < 1e-6
    except ValueError:
        return False


def numeric_outcome(answer: str | None, reference: str, evaluator: str) -> Outcome:
    """Success when the answer's last `ANSWER:` value equals the reference number (commas allowed)."""
    return answer_outcome(answer, reference, evaluator, _same_number)


def family_tasks(env: str, seed: int, n: int, families: tuple[str, ...] | list[str],
                 make: Callable[[random.Random, str], tuple[str, str, dict[str, Any]]]) -> list[Task]:
    """`n` tasks of environment `env`: task i is of family `families[(seed + i) % len]`, drawn by
    `make(rng, family) -> (question, reference answer, metadata)` from its own seeded generator."""
    out = []
    for i in range(n):
        family = families[(seed + i) % len(families)]
        question, reference, metadata = make(random.Random(stable_seed(seed, env, i)), family)
        out.append(Task(id=f"{env}-{seed}-{i}", query=question, reference_answer=reference, metadata={"family": family, **metadata}))
    return out


def world_tasks(env: str, seed: int, n: int, families: tuple[str, ...] | list[str],
                make_task: Callable[[random.Random, str], tuple[str, dict[str, Any]]],
                answer_of: Callable[[dict[str, Any]], Any]) -> list[Task]:
    """`family_tasks` whose `make_task(rng, family) -> (question, world)` draws a task's world: the reference is
    `answer_of(world)` as text and the world is the task's metadata `world` (what the tools and rules read)."""

    def make(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
        question, world = make_task(rng, family)
        return question, str(answer_of(world)), {"world": world}

    return family_tasks(env, seed, n, families, make)
