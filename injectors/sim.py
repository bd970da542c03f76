"""Simulated agents: a litellm custom provider whose policy reads the conversation.

`litellm.completion(model="faultlens-sim/<env>", messages=...)` is answered by
the environment's `SimPolicy`. The policy sees exactly what a real model would
see (the system prompt naming the agent, the task, tool outputs, other agents'
messages) and acts on it: given wrong inputs it carries them forward, given a
tool failure it retries, as its environment documents. It is not a replay of a
seed run. With `--agent-model MODEL` the same programs call a real model
instead, with the same prompts.

Settings (`SimConfig`, passed as litellm `metadata={"faultlens_sim": {...}}`
by `injectors.envs.base.Runtime`):

- `seed`: randomness of the simulated agents (every random choice is a
  function of the seed, the agent and the conversation, so a run is
  reproducible and a replayed prefix gets the same answers).
- `noise`: the rate of *recovered, non-decisive* mistakes at each opportunity
  the environment offers (a mistyped search retried, a misread value the
  verifier corrects, code that crashes and is rewritten).
- `tendencies`: per agent, per failure mode, the probability that the agent
  makes a (possibly decisive) mistake of that mode at a step where the mode
  applies. The mistake is made by the offline error generator of that mode.
- Lessons: when the system prompt carries a lesson (a line
  `- [MODE] When: <situation> Do: <advice>`, see `Runtime.system`) whose mode
  is one the agent tends to, and whose situation shares content words with the
  task, the agent follows it: that tendency is suppressed for the call.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from faultlens.middleware.model.trace import StepKind
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.replay.session import canonical
from faultlens.middleware.model.taxonomy import get_mode

from .seeding import stable_seed

SIM_PREFIX = "faultlens-sim"  # litellm provider name: models are `faultlens-sim/<env>`

__all__ = ["SimConfig", "SimContext", "SimPolicy", "ensure_registered", "parse_lessons", "policy_for"]


@dataclass
class SimConfig:
    seed: int = 0
    noise: float = 0.0
    tendencies: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SimConfig:
        data = data or {}
        return cls(seed=int(data.get("seed", 0)), noise=float(data.get("noise", 0.0)),
                   tendencies={a: dict(m) for a, m in (data.get("tendencies") or {}).items()})


@dataclass(frozen=True)
class ShownLesson:
    mode: str | None
    situation: str
    advice: str


_LESSON = re.compile(r"^- \[([^\]]+)\] When: (.*?) Do: (.*)$", re.M)
_AGENT = re.compile(r"^You are the ([A-Za-z_][\w-]*)")
_WORD = re.compile(r"[a-z]{4,}")
_STOP = {"when", "with", "that", "this", "from", "what", "which", "have", "their", "there", "into", "than", "then",
         "about", "after", "before", "does", "task", "question", "answer", "step", "agent"}


def parse_lessons(system_prompt: str) -> list[ShownLesson]:
    out = []
    for mode, situation, advice in _LESSON.findall(system_prompt):
        out.append(ShownLesson(None if mode == "general" else mode.strip().upper(), situation.strip(), advice.strip()))
    return out


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class SimContext:
    """What a policy gets besides the messages: its agent, settings, randomness."""

    def __init__(self, env_name: str, messages: Sequence[dict[str, Any]], config: SimConfig) -> None:
        self.env_name = env_name
        self.messages = list(messages)
        self.config = config
        system = self.messages[0]["content"] if self.messages and self.messages[0].get("role") == "system" else ""
        match = _AGENT.match(system)
        if match is None:
            raise ConfigError(f"{SIM_PREFIX}/{env_name}: the system prompt must start with 'You are the <agent>'")
        self.agent = match.group(1)
        self.system = system
        self.lessons = parse_lessons(system)
        self._key = canonical([m.get("content", "") for m in self.messages])

    @property
    def task_text(self) -> str:
        for m in self.messages[1:]:
            if m.get("role") == "user":
                return str(m.get("content") or "")
        return ""

    def rng(self, label: str) -> random.Random:
        return random.Random(stable_seed(self.config.seed, self.agent, self._key, label))

    def noise(self, label: str) -> bool:
        """Whether to make a recovered mistake at this opportunity (rate `config.noise`)."""
        return self.config.noise > 0 and self.rng("noise:" + label).random() < self.config.noise

    def follows_lesson(self, mode: str) -> bool:
        """A lesson for `mode` is shown and its situation matches the task."""
        words = content_words(self.task_text)
        for lesson in self.lessons:
            if lesson.mode == mode and len(content_words(lesson.situation) & words) >= 1:
                return True
        return False

    def slip(self, kind: StepKind) -> str | None:
        """The mode of the mistake this agent makes now at a `kind` step, or None."""
        tendencies = self.config.tendencies.get(self.agent) or {}
        for mode in sorted(tendencies):
            if kind not in get_mode(mode).applies_to or self.follows_lesson(mode):
                continue
            if self.rng("slip:" + mode).random() < tendencies[mode]:
                return mode
        return None


class SimPolicy(Protocol):
    """An environment's simulated agents: `respond(ctx)` → the reply text."""

    def respond(self, ctx: SimContext) -> str: ...


_POLICIES: dict[str, SimPolicy] = {}
# The environments the provider answers for: `get(name)` (an object with `policy()`) and `names()`. The registry
# (`injectors.envs.registry`) hands them over when it is imported, as it imports the environments that use this
# module: so this module imports no environment, and no import cycle runs through it.
_ENVIRONMENTS: list[tuple[Callable[[str], Any], Callable[[], list[str]]]] = []


def serve_environments(get: Callable[[str], Any], names: Callable[[], list[str]]) -> None:
    """Answer `faultlens-sim/<env>` with the policy of `get(env)`; `names()`: the environments to price at zero."""
    _ENVIRONMENTS[:] = [(get, names)]


def _environments() -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    if not _ENVIRONMENTS:
        raise ConfigError("the simulated agents answer for the environments: import faultlens.injectors.envs first")
    return _ENVIRONMENTS[0]


def policy_for(env_name: str) -> SimPolicy:
    if env_name not in _POLICIES:
        get_env, _ = _environments()
        _POLICIES[env_name] = get_env(env_name).policy()
    return _POLICIES[env_name]


def _make_handler():
    # Built on first use: importing litellm is slow, and `import injectors.sim` should not pay for it.
    import litellm
    from litellm import CustomLLM

    class SimLLM(CustomLLM):
        """litellm provider `faultlens-sim`: model `faultlens-sim/<env>`."""

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any):
            params = kwargs.get("litellm_params") or {}
            metadata = (params.get("metadata") if isinstance(params, dict) else None) or {}
            config = SimConfig.from_dict(metadata.get("faultlens_sim"))
            env_name = model.split("/", 1)[-1]
            ctx = SimContext(env_name, messages, config)
            text = policy_for(env_name).respond(ctx)
            return litellm.ModelResponse(
                model=f"{SIM_PREFIX}/{env_name}",
                choices=[{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            )

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any):
            return self.completion(model, messages, *args, **kwargs)

    return SimLLM()


def ensure_registered() -> None:
    """Register the `faultlens-sim` provider with litellm (idempotent)."""
    import litellm

    providers = litellm.custom_provider_map or []
    if any(p.get("provider") == SIM_PREFIX for p in providers):
        return
    litellm.custom_provider_map = [*providers, {"provider": SIM_PREFIX, "custom_handler": _make_handler()}]
    # litellm reads the map into its provider list when it is set via this helper.
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    # Simulated calls cost nothing; saying so also spares litellm a slow price look-up per call.
    litellm.register_model({f"{SIM_PREFIX}/{name}": {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
                                                     "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0,
                                                     "litellm_provider": SIM_PREFIX, "mode": "chat",
                                                     "max_tokens": 1_000_000} for name in _environments()[1]()})
