"""Error generators: rewrite the action at step t into a natural-looking error of a mode.

Two kinds:

- `TemplateGenerator` (offline, `--generator template`): per mode, rules that
  edit the action text the way such a mistake looks in practice (a changed
  number, a swapped name, a wrong tool argument, a repeated call, a premature
  answer, a plan missing a sub-goal, ...). An environment can add its own rules
  for a mode with `Environment.mutators()`; they are tried before the generic
  ones.
- `LLMGenerator(model)` (`--generator MODEL`): asks a model through litellm to
  rewrite the action, given the mode's definition and example and the trace so
  far.

Either way, a generated action must read like an ordinary action: it must not
announce itself (`announces()` rejects words such as "error", "wrong",
"inject", "mistake" that the original action did not contain).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.model.trace import Step, StepKind, Trace

from .envs.base import Action, parse_action, render_action
from .applicability import get_mode

__all__ = ["GenInput", "Generated", "Generator", "LLMGenerator", "TemplateGenerator", "announces", "get_generator",
           "slip_text"]


@dataclass
class PrefixItem:
    agent: str
    kind: str
    text: str


@dataclass
class GenInput:
    """What a generator sees: the action at step t and what came before it."""

    mode: str
    kind: StepKind
    agent: str
    text: str
    prefix: list[PrefixItem]
    rng: random.Random
    distractors: list[list[str]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    env_name: str = ""
    task_query: str = ""

    @property
    def action(self) -> Action | None:
        return parse_action(self.text)

    def prefix_text(self) -> str:
        return "\n".join(p.text for p in self.prefix)


@dataclass(frozen=True)
class Generated:
    text: str
    reason: str


Rule = Callable[[GenInput], "Generated | None"]

_MARKERS = re.compile(r"\b(error|errors|erroneous|wrong|wrongly|inject\w*|mistake\w*|incorrect\w*|bug|buggy|fault\w*|"
                      r"hallucinat\w*|corrupt\w*|fake|bogus)\b", re.I)


def announces(generated: str, original: str = "") -> bool:
    """True if the generated text carries a marker word the original did not."""
    before = {m.lower() for m in _MARKERS.findall(original)}
    return any(m.lower() not in before for m in _MARKERS.findall(generated))


# ---------------------------------------------------------------- text helpers

_NUMBER = re.compile(r"(?<![\w.\[\]'\"#-])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w\]])")


def numbers(text: str) -> list[re.Match]:
    return list(_NUMBER.finditer(text))


def perturb_number(token: str, rng: random.Random) -> str:
    """A plausible slip on a number: a digit changed or transposed, a factor of ten."""
    comma = "," in token
    raw = token.replace(",", "")
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    value = float(raw)
    for _ in range(10):
        choice = rng.randrange(4)
        digits = list(raw)
        positions = [i for i, c in enumerate(digits) if c.isdigit()]
        if choice == 0 and len(positions) >= 2:
            i = rng.randrange(len(positions) - 1)
            a, b = positions[i], positions[i + 1]
            digits[a], digits[b] = digits[b], digits[a]
            new = "".join(digits)
        elif choice == 1:
            i = rng.choice(positions)
            digits[i] = str((int(digits[i]) + rng.choice([1, 2, 8, 9])) % 10)
            new = "".join(digits)
        elif choice == 2 and value >= 20:
            new = f"{value / 10:.{decimals}f}" if decimals else str(int(value) // 10)
        else:
            delta = rng.choice([1, 2, 3, 5]) * (10 ** max(0, len(str(int(value))) - 2))
            new_value = value + rng.choice([-1, 1]) * delta
            if new_value < 0:
                new_value = value + delta
            new = f"{new_value:.{decimals}f}" if decimals else str(int(new_value))
        new = new.lstrip("0") or "0"
        if new.startswith("."):
            new = "0" + new
        if new != raw and not (len(new) > 1 and new.startswith("0") and not new.startswith("0.")):
            return f"{int(float(new)):,}" if comma and not decimals else new
    return str(int(value) + 1) if not decimals else f"{value + 1:.{decimals}f}"


def replace_span(text: str, match: re.Match, new: str, group: int = 0) -> str:
    """`text` with the span of `match` (or of its `group`) replaced by `new`."""
    return text[: match.start(group)] + new + text[match.end(group):]


def change_a_number(text: str, rng: random.Random, avoid_years: bool = False) -> tuple[str, str, str] | None:
    found = numbers(text)
    if avoid_years:
        found = [m for m in found if not re.fullmatch(r"(19|20)\d\d", m.group(0))] or found
    if not found:
        return None
    match = rng.choice(found)
    new = perturb_number(match.group(0), rng)
    return replace_span(text, match, new), match.group(0), new


def present(text: str, groups: Sequence[Sequence[str]]) -> list[tuple[str, list[str]]]:
    """Distractor values found in `text` (whole words), longest first, with their group."""
    hits = []
    for group in groups:
        for value in group:
            if re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", text):
                hits.append((value, list(group)))
    return sorted(hits, key=lambda h: -len(h[0]))


def swap_value(text: str, old: str, new: str, count: int = 0) -> str:
    return re.sub(rf"(?<![\w]){re.escape(old)}(?![\w])", new, text, count=count)


def swap_entity(inp: GenInput, where: str, pool: Callable[[str, list[str]], list[str]]) -> tuple[str, str, str] | None:
    hits = present(where, inp.distractors)
    inp.rng.shuffle(hits)
    for old, group in hits:
        choices = [v for v in pool(old, group) if v != old and not re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", where)]
        if choices:
            new = inp.rng.choice(sorted(choices))
            return swap_value(where, old, new), old, new
    return None


def with_argument(inp: GenInput, argument: str) -> str:
    action = inp.action
    assert action is not None
    code = "\n" in argument or action.tool in ("run_python",)
    return render_action(action.tool, argument, action.thought, code=code)


# ---------------------------------------------------------------- helpers of the environments' own rules
# For teams whose answer is an `ANSWER: <number>` line and whose agents pass figures on to each other.
ANSWER_NUMBER = re.compile(r"^ANSWER: (\d+)$", re.M)


def answer_line(inp: GenInput, agent: str) -> re.Match | None:
    """The `ANSWER: <number>` line of `agent`'s final answer in the step, or None."""
    return ANSWER_NUMBER.search(inp.text) if inp.agent == agent and inp.kind == StepKind.final_answer else None


def guessed_answer(inp: GenInput, agent: str, excuse: str, before: str) -> Generated | None:
    """A.5: `agent` answers a guess in its plan's step, giving `excuse`, before it has any figure (`before`: whose)."""
    if inp.agent != agent or inp.kind != StepKind.plan:
        return None
    guess = inp.rng.randint(10, 300)
    return Generated(f"{excuse}\nANSWER: {guess}", f"answers {guess} before {before}")


def miswritten_answer(inp: GenInput, answer: re.Match, new: str) -> Generated:
    """R.3: the answer line (`answer_line`) says `new` where the calculator gave its number."""
    return Generated(inp.text.replace(answer.group(0), f"ANSWER: {new}"), f"answers {new} where the calculator gave "
                     f"{answer.group(1)}")


def answer_with_unit(inp: GenInput, answer: re.Match, units: Sequence[str]) -> Generated:
    """A.4: the answer line (`answer_line`) carries one of `units`, not the bare number asked for."""
    unit = inp.rng.choice(list(units))
    return Generated(inp.text.replace(answer.group(0), f"ANSWER: {answer.group(1)} {unit}"),
                     "gives the answer with a unit, not a bare number")


def slipped_digits(old: str) -> str:
    """A figure passed on with its digits slipped: reversed, or 10 more where reversing keeps it or drops a 0."""
    return old[::-1] if len(old) > 1 and old[::-1] != old and not old.endswith("0") else str(int(old) + 10)


def slipped_result(old: str, rng: random.Random) -> str:
    """A result written down wrong: its digits reversed, or 1 or 10 off where reversing keeps it."""
    return str(int(old) + rng.choice((-10, 10, 1, -1))) if len(set(old)) == 1 or old[::-1] == old else old[::-1]


def slipped_answer(inp: GenInput, agent: str) -> Generated | None:
    """R.3: `agent`'s answer line (`answer_line`) writes the calculator's result down wrong, as `slipped_result` does,
    kept a positive number without a leading zero (10 more where the slip would give one)."""
    m = answer_line(inp, agent)
    if m is None:
        return None
    new = slipped_result(m.group(1), inp.rng)
    if new.startswith("0") or new.startswith("-"):
        new = str(int(m.group(1)) + 10)
    return miswritten_answer(inp, m, new)


def unseen_numbers(seen: str, low: int, high: int) -> list[int]:
    """The whole numbers from `low` to `high` (excluded) that `seen` does not state: a figure made up."""
    return [v for v in range(low, high) if not re.search(rf"(?<!\d){v}(?!\d)", seen)]


# ---------------------------------------------------------------- generic rules per mode

def _r3(inp: GenInput) -> Generated | None:
    if inp.kind == StepKind.tool_call:
        return None
    changed = change_a_number(inp.text, inp.rng, avoid_years=True)
    if changed is None:
        return None
    text, old, new = changed
    return Generated(text, f"the value {old} is stated as {new}")


def _r1(inp: GenInput) -> Generated | None:
    seen = inp.prefix_text()
    swapped = swap_entity(inp, inp.text, lambda old, group: [v for v in group if v not in seen])
    if swapped is not None and inp.kind != StepKind.tool_call:
        text, old, new = swapped
        return Generated(text, f"states {new!r}, which appears nowhere in its inputs, instead of {old!r}")
    if inp.kind == StepKind.final_answer:
        changed = change_a_number(inp.text, inp.rng)
        if changed:
            text, old, new = changed
            if new not in seen:
                return Generated(text, f"answers {new}, a value found nowhere in the run, instead of {old}")
    return None


def _v1(inp: GenInput) -> Generated | None:
    if inp.kind == StepKind.tool_call:
        return None
    seen = inp.prefix_text()
    swapped = swap_entity(inp, inp.text, lambda old, group: [v for v in group if re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", seen)])
    if swapped is not None:
        text, old, new = swapped
        return Generated(text, f"uses {new!r}, from earlier in the run, in place of {old!r}")
    return None


def _c2(inp: GenInput) -> Generated | None:
    changed = change_a_number(inp.text, inp.rng, avoid_years=True)
    if changed is not None:
        text, old, new = changed
        return Generated(text, f"passes on {new} where its source says {old}")
    swapped = swap_entity(inp, inp.text, lambda old, group: group)
    if swapped is not None:
        text, old, new = swapped
        return Generated(text, f"passes on {new!r} where its source says {old!r}")
    return None


def _a2(inp: GenInput) -> Generated | None:
    action = inp.action
    if action is None:
        return None
    swapped = swap_entity(inp, action.argument, lambda old, group: group)
    if swapped is not None:
        argument, old, new = swapped
        return Generated(with_argument(inp, argument), f"calls {action.tool} with {new!r} instead of {old!r}")
    changed = change_a_number(action.argument, inp.rng)
    if changed is not None:
        argument, old, new = changed
        return Generated(with_argument(inp, argument), f"calls {action.tool} with {new} instead of {old}")
    return None


_INVENTED = {"search": "lookup", "run_python": "run_sql", "calculate": "math_eval", "read": "open_document"}


def _a3(inp: GenInput) -> Generated | None:
    action = inp.action
    if action is None:
        return None
    invented = _INVENTED.get(action.tool, f"{action.tool}_all")
    if invented in inp.tools:
        return None
    return Generated(render_action(invented, action.argument, action.thought, code="\n" in action.argument),
                     f"calls a tool '{invented}' that does not exist")


def _a1(inp: GenInput) -> Generated | None:
    action = inp.action
    others = [t for t in inp.tools if action is not None and t != action.tool]
    if action is None or not others:
        return None
    tool = inp.rng.choice(sorted(others))
    return Generated(render_action(tool, action.argument, action.thought), f"calls {tool} where {action.tool} was needed")


def _a4(inp: GenInput) -> Generated | None:
    action = inp.action
    if action is not None and "\n" in action.argument:
        lines = action.argument.splitlines()
        last = lines[-1]
        if last.endswith(")"):
            lines[-1] = last[:-1]
            return Generated(with_argument(inp, "\n".join(lines)), "the code is missing a closing parenthesis")
    match = re.search(r"^Answer:\s*(.+)$", inp.text, re.M)
    if match and inp.kind == StepKind.final_answer:
        value = match.group(1).strip()
        options = [f"The answer is {value}.", f"Answer: about {value}", f"Answer: {value} (see above)"]
        new = inp.text[: match.start()] + inp.rng.choice(options) + inp.text[match.end():]
        return Generated(new, "the answer is not in the required 'Answer: <value>' form")
    return None


def _a6(inp: GenInput) -> Generated | None:
    for item in reversed(inp.prefix):
        if item.agent == inp.agent and item.kind == inp.kind.value and item.text != inp.text:
            if inp.kind == StepKind.tool_call or parse_action(item.text) is None:
                return Generated(item.text, "repeats its previous action instead of moving on")
    return None


def _v3(inp: GenInput) -> Generated | None:
    if inp.kind != StepKind.tool_result:
        return None
    changed = change_a_number(inp.text, inp.rng)
    if changed is not None:
        text, old, new = changed
        return Generated(text, f"the tool returned stale data ({new} where the data says {old}) and nobody noticed")
    return Generated("Timed out after 10 s.", "the tool timed out and the run went on without its result")


GENERIC: dict[str, list[Rule]] = {
    "R.1": [_r1], "R.3": [_r3], "V.1": [_v1], "C.2": [_c2], "A.1": [_a1], "A.2": [_a2], "A.3": [_a3],
    "A.4": [_a4], "A.6": [_a6], "V.3": [_v3],
}


class Generator:
    """Turns (mode, action at t, context) into an erroneous action, or None."""

    name: str = ""

    def generate(self, inp: GenInput) -> Generated | None:
        raise NotImplementedError


class TemplateGenerator(Generator):
    """Offline rules: the environment's rules for the mode first, then the generic ones."""

    name = "template"

    def generate(self, inp: GenInput) -> Generated | None:
        from . import envs

        rules: list[Rule] = []
        if inp.env_name:
            rules.extend(envs.get(inp.env_name).mutators().get(inp.mode, []))
        rules.extend(GENERIC.get(inp.mode, []))
        for rule in rules:
            out = rule(inp)
            if out is not None and out.text.strip() != inp.text.strip() and not announces(out.text, inp.text):
                return out
        return None


LLM_PROMPT = """You rewrite one step of an AI agent's run so that it contains a realistic mistake of a given kind.

Mistake kind: {code} {name}: {definition}
Example of this kind: {example}

Task given to the agents: {task}

The run so far (oldest first):
{prefix}

The step to rewrite (agent {agent}, a {kind} step):
<<<
{text}
>>>

Write the rewritten step only: the same format and length as the original (keep any 'Action: <tool>' line
and code fences), with one mistake of the kind above, written as if the agent believed it was right.
Do not comment on the change; never use the words error, wrong, mistake or inject."""


class LLMGenerator(Generator):
    """Asks `model` (any litellm model) to rewrite the action."""

    def __init__(self, model: str, **completion_kwargs: Any) -> None:
        self.model = model
        self.name = model
        self.kwargs = completion_kwargs
        self.unparsed: list[str] = []

    def prompt(self, inp: GenInput) -> str:
        mode = get_mode(inp.mode)
        prefix = "\n".join(f"[{i}] {p.agent} ({p.kind}): {p.text[:600]}" for i, p in enumerate(inp.prefix[-30:]))
        return LLM_PROMPT.format(code=mode.code, name=mode.name, definition=mode.definition, example=mode.example,
                                 task=inp.task_query, prefix=prefix or "(nothing yet)", agent=inp.agent,
                                 kind=inp.kind.value, text=inp.text)

    def generate(self, inp: GenInput) -> Generated | None:
        import litellm

        response = litellm.completion(model=self.model, messages=[{"role": "user", "content": self.prompt(inp)}],
                                      temperature=0, **self.kwargs)
        raw = response.choices[0].message.content or ""
        text = raw.strip()
        if text.startswith("<<<"):
            text = text[3:]
        if text.endswith(">>>"):
            text = text[:-3]
        text = text.strip()
        # An answer we cannot use is kept for audit and the attempt is not counted as generated.
        if not text or text == inp.text.strip() or announces(text, inp.text):
            self.unparsed.append(raw)
            return None
        if inp.kind == StepKind.tool_call and parse_action(text) is None:
            self.unparsed.append(raw)
            return None
        return Generated(text, f"{get_mode(inp.mode).name} written by {self.model}")


def get_generator(spec: str) -> Generator:
    """`template` → offline rules; anything else is a litellm model name."""
    return TemplateGenerator() if spec == "template" else LLMGenerator(spec)


def gen_input(trace: Trace, t: int, mode: str, rng: random.Random, env) -> GenInput:
    """The generator's view of step t of a recorded seed trace."""
    step: Step = trace.steps[t]
    prefix = [PrefixItem(s.agent, s.kind.value, s.content) for s in trace.steps[:t]]
    return GenInput(mode=mode, kind=step.kind, agent=step.agent, text=step.content, prefix=prefix, rng=rng,
                    distractors=env.distractor_groups(trace.task), tools=sorted(env.tools), agents=env.agent_names,
                    env_name=env.name, task_query=trace.task.query)


def slip_text(ctx, kind: StepKind, text: str) -> str:
    """Used by simulated policies: apply the agent's error tendency (if it fires) to `text`."""
    mode = ctx.slip(kind)
    if mode is None:
        return text
    from . import envs

    env = envs.get(ctx.env_name)
    prefix = [PrefixItem("", m["role"], str(m.get("content") or "")) for m in ctx.messages[1:]]
    inp = GenInput(mode=mode, kind=kind, agent=ctx.agent, text=text, prefix=prefix, rng=ctx.rng("gen:" + mode),
                   distractors=env.distractor_groups(None), tools=sorted(env.tools), agents=env.agent_names,
                   env_name=env.name, task_query=ctx.task_text)
    out = TemplateGenerator().generate(inp)
    return out.text if out is not None else text
