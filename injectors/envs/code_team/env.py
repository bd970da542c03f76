"""`code_team`: an architect, a coder and a tester write a Python function from a spec, as a LangGraph graph.

The team is a LangGraph `StateGraph` whose nodes call `rt.ask` / `rt.tool`
(so record/replay stays exact: one Step per recorded call), traced through the
LangGraph instrumentation when a tracer is given (its callback handler goes in
`config["callbacks"]`):

    architect ─► coder ─► tester ─┬─► architect ─► END
      (design)     ▲              │    (review: submit)
                   └──────────────┘ (tests fail: one more round at most)

One node per agent, named after it, so the LangGraph instrumentation's spans
(one `invoke_agent <node>` per node run) carry the team's agent names.

- **architect** (a `plan` step; on half of the tasks after looking at the
  spec's worked examples with `spec_examples`) turns the spec into a design: the function,
  one `- key: value` line per rule (thresholds, rates, rounding, invalid
  input), a `- tests:` line with the calls the tester must check, and a
  `- workflow:` line; at the end (a `final_answer` step) it submits the version
  the tester approved (`Submit version <k>.`).
- **coder** (a `message` step per version) writes the function from the design
  (`Version <k>:` + a python block); sometimes it first calls `check_syntax`.
  After a failed test run it gets the tester's report and writes the next
  version.
- **tester** calls `run_tests` with `expect(<call>, <value>)` lines computed
  from the design, for the design's test calls (run in a `python -I -S`
  subprocess with a 10 s limit, one subprocess per run), then reports
  (`All N tests pass on version k. Approved.` or the failures). In the second
  round it runs the same test lines again (its test file persists), so a wrong
  test stays wrong.

The evaluator runs hidden tests (every boundary and invalid input of the
spec's true parameters) on the submitted code, in one subprocess.

Simulated agents: the coder writes what the design says; the tester's expected
values come from the design too, except on half of the tasks (decided by the
spec), where the tester works them out from the spec itself. So a design error
passes the team's tests on the first kind of task (only the hidden tests catch
it); on the second kind the tests fail, and the coder, whose code matched the
design, writes the next version from the spec: the design error is caught.
Either way, a coder's slip is caught when a listed test
exercises it. Recovered mistakes in seeds: the coder's first version has a
slip (a flipped comparison, an off-by-one constant, a missing check) at rate
2 × `noise`, always one that a listed test exercises, so the tester catches it
and the next version fixes it.
"""

from __future__ import annotations

import contextvars
import random
import re
from typing import Any, TypedDict

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task

from faultlens.injectors.generators import slip_text
from ..registry import register
from ..base import (
    Conversation,
    Environment,
    Runtime,
    ToolSpec,
    parse_action,
    render_action,
    stable_seed,
)
from . import mistakes
from .world import (
    FAMILIES,
    FUNCTION,
    TESTS_MARK,
    code_for,
    design_lines,
    expect_lines,
    expected,
    make_params,
    parse_design,
    run_tests,
    spec_text,
    test_inputs,
)

MAX_ROUNDS = 2
SPEC_CHECKED = "checked against the spec"
WORKFLOW = "- workflow: coder writes the function; tester runs the tests; I submit the version the tester approves"
_TRACER: contextvars.ContextVar[Any] = contextvars.ContextVar("code_team_tracer", default=None)


def check_syntax(code: str, task: Task) -> str:
    """Compile the code (nothing is run): `OK` or the syntax error."""
    try:
        compile(code, "solution.py", "exec")
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    return "OK: the code compiles."


def spec_examples(name: str, task: Task) -> str:
    """Two worked examples from the spec's owner (typical inputs, not the boundaries)."""
    if name.strip() != task.metadata["function"].split("(")[0]:
        return f"No examples for {name.strip()!r}; the spec is about {task.metadata['function']}."
    lines = [line for line in task.metadata["examples"].splitlines() if line]
    return "\n".join(lines) if lines else "No examples."


def run_tests_tool(argument: str, task: Task) -> str:
    return run_tests(argument)


# ---------------------------------------------------------------- parsing the team's messages

_CODE = re.compile(r"```python\n(.*?)\n?```", re.S)
_VERSION = re.compile(r"^Version (\d+):", re.M)
_SUBMIT = re.compile(r"^Submit version (\d+)\.\s*$", re.M)
_TESTS_LINE = re.compile(r"^- tests: (.+)$", re.M)


def code_in(text: str) -> str | None:
    m = _CODE.search(text)
    return m.group(1) if m else None


def design_tests(design: str) -> list[str]:
    m = _TESTS_LINE.search(design)
    return [c.strip() for c in m.group(1).split(";") if c.strip()] if m else []


def _first_int(text: str) -> int:
    found = re.search(r"\d+", text)
    assert found is not None  # the spec patterns only capture text with a number
    return int(found.group(0))


def params_from_spec(spec: str) -> tuple[str, dict[str, Any]] | None:
    """What the architect reads from the spec (the simulated architect's understanding)."""
    if m := re.search(r"`grade\(score\)`.*?A score of (\d+ or more|more than \d+) is 'merit', a score of (\d+ or more|more than \d+) is 'pass'", spec):
        cmp = ">" if m.group(1).startswith("more") else ">="
        return "grade", {"merit": _first_int(m.group(1)), "pass": _first_int(m.group(2)),
                         "cmp": cmp, "guard": "raise ValueError" in spec}
    if m := re.search(r"`shipping_cost\(weight\)`.*?costs ([\d.]+) for up to (\d+) kg, plus ([\d.]+) for every started kg.*?above (\d+) kg, raises", spec):
        return "shipping", {"base": float(m.group(1)), "first": int(m.group(2)), "rate": float(m.group(3)), "max": int(m.group(4)),
                            "guard": True}
    if m := re.search(r"`order_total\(prices\)`.*?is (\d+ or more|more than \d+), take (\d+)% off", spec):
        return "total", {"threshold": _first_int(m.group(1)), "pct": int(m.group(2)),
                         "cmp": ">" if m.group(1).startswith("more") else ">=", "digits": 2, "guard": True}
    if m := re.search(r"`late_fee\(days\)`.*?The first (\d+) days late are free; after that the fee is ([\d.]+) per day.*?never more than ([\d.]+)\.", spec):
        return "late_fee", {"grace": int(m.group(1)), "rate": float(m.group(2)), "cap": float(m.group(3)), "guard": True}
    if m := re.search(r"`moving_average\(values\)`: the averages of every run of (\d+) consecutive values, in order, each rounded to (\d) decimals", spec):
        return "average", {"window": int(m.group(1)), "digits": int(m.group(2)), "guard": True}
    return None


def render_design(family: str, p: dict[str, Any], tests: list[str]) -> str:
    return "\n".join(["Design:", *design_lines(family, p), f"- tests: {'; '.join(tests)}", WORKFLOW])


def design_params_for_tester(design: str) -> tuple[str | None, dict[str, Any]]:
    family, p = parse_design(design)
    p.pop("use", None)  # the tester reasons about behaviour, not imports
    return family, p


# ---------------------------------------------------------------- simulated agents

def _slips(family: str, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Slips a coder makes in a first version: a flipped comparison, an off-by-one constant, a missing check."""
    out = []
    for key in ("cmp", "cmp_merit", "cmp_pass"):
        if key in p:
            out.append({**p, key: ">" if p[key] == ">=" else ">="})
    for key in ("merit", "pass", "threshold", "grace", "first", "window"):
        if isinstance(p.get(key), int):
            out.append({**p, key: p[key] + 1})
    if p.get("guard"):
        out.append({**p, "guard": False})
    if "digits" in p:
        out.append({**p, "digits": p["digits"] - 1})
    return out


class TeamPolicy:
    """The simulated architect, coder and tester; each reads only its own conversation."""

    def respond(self, ctx) -> str:
        return getattr(self, ctx.agent)(ctx)

    def architect(self, ctx) -> str:
        text = ctx.task_text
        if text.startswith("Spec: ") and "Write the design" in text:
            asked = [m for m in ctx.messages if m["role"] == "assistant"]
            if not asked and ctx.rng("examples").random() < 0.5:
                spec = params_from_spec(text)
                call = FUNCTION[spec[0]].split("(")[0] if spec else "f"
                return slip_text(ctx, StepKind.tool_call, render_action("spec_examples", call, "Let me look at the spec's worked examples first."))
            found = params_from_spec(text)
            if found is None:
                return slip_text(ctx, StepKind.plan, "Design:\n- function: unknown\n" + WORKFLOW)
            family, p = found
            tests = test_inputs(family, p, ctx.rng("tests"))
            return slip_text(ctx, StepKind.plan, render_design(family, p, tests))
        report = text.split("The tester's last report:\n", 1)[-1]
        approved = re.search(r"Approved(?: version (\d+))?", report)
        on = re.search(r"on version (\d+)", report)
        if approved:
            k = approved.group(1) or (on.group(1) if on else None)
            if k is None:
                versions = re.search(r"Versions written: (\d+)", text)
                k = versions.group(1) if versions else "1"
            return slip_text(ctx, StepKind.final_answer, f"Submit version {k}.")
        return slip_text(ctx, StepKind.final_answer, "No version passed the tests, so there is nothing to submit.\nAnswer: none")

    def coder(self, ctx) -> str:
        msgs = ctx.messages
        design = ctx.task_text.split("Design from the architect:\n", 1)[-1]
        family, p = parse_design(design)
        versions = [int(v) for m in msgs if m["role"] == "assistant" for v in _VERSION.findall(m["content"])]
        k = (max(versions) + 1) if versions else 1
        last = msgs[-1]["content"]
        if family is None:
            return slip_text(ctx, StepKind.message, f"Version {k}:\nI cannot tell from the design which function to write.")
        code = code_for(family, p)
        report = last.split("The tester's report:\n", 1)[-1]
        previous = [code_in(m["content"]) for m in msgs if m["role"] == "assistant" and code_in(m["content"])]
        if k > 1 and SPEC_CHECKED in report and previous and previous[-1] == code:
            # it wrote what the design says and the spec-based tests still fail: it trusts the spec over the design
            spec = ctx.task_text.split("Spec: ", 1)[-1].split("\n\nDesign from the architect:", 1)[0]
            found = params_from_spec(spec)
            if found is not None:
                code = code_for(found[0], parse_design("Design:\n" + "\n".join(design_lines(*found)))[1])
        if k == 1 and ctx.config.noise > 0 and ctx.rng("first-draft").random() < min(1.0, 2 * ctx.config.noise):
            tests = design_tests(design)
            _, tp = design_params_for_tester(design)
            try:
                want = expected(code_for(family, tp), tests)
            except Exception:  # a design the canonical code cannot run: no slip to make
                want = None
            slips = _slips(family, p)
            ctx.rng("which-slip").shuffle(slips)
            for slip in slips if want is not None else []:
                try:
                    if expected(code_for(family, {k2: v for k2, v in slip.items() if k2 != "use"}), tests) != want:
                        code = code_for(family, slip)
                        break
                except Exception:
                    continue
        checked = any(parse_action(m["content"]) for m in msgs if m["role"] == "assistant")
        if last.startswith("Output of check_syntax:") or checked:
            return slip_text(ctx, StepKind.message, f"Version {k}:\n```python\n{code}\n```")
        if ctx.rng("check-syntax").random() < 0.4:
            return slip_text(ctx, StepKind.tool_call, render_action("check_syntax", code, "Let me make sure it compiles.", code=True))
        return slip_text(ctx, StepKind.message, f"Version {k}:\n```python\n{code}\n```")

    def tester(self, ctx) -> str:
        msgs = ctx.messages
        text = ctx.task_text
        design = text.split("Design:\n", 1)[-1].split("\n\nVersion ", 1)[0]
        k = re.search(r"^Version (\d+) from the coder", text, re.M)
        version = k.group(1) if k else "1"
        if "tester not needed" in text:
            return slip_text(ctx, StepKind.message, f"The design leaves testing to the coder. Approved version {version}.")
        if msgs[-1]["role"] == "user" and msgs[-1]["content"].startswith("Output of check_syntax:"):
            if "OK" in msgs[-1]["content"]:  # it takes a clean compile for a passing run
                return slip_text(ctx, StepKind.message, f"Version {version} compiles cleanly. Approved version {version}.")
            return slip_text(ctx, StepKind.message, f"Version {version} does not compile:\n{msgs[-1]['content'].split(chr(10), 1)[-1]}")
        if msgs[-1]["role"] == "user" and msgs[-1]["content"].startswith("Output of run_tests:"):
            output = msgs[-1]["content"].split("\n", 1)[-1]
            m = re.search(r"^(\d+) passed, (\d+) failed", output, re.M)
            if m and int(m.group(2)) == 0 and int(m.group(1)) > 0:
                return slip_text(ctx, StepKind.message, f"All {m.group(1)} tests pass on version {version}. Approved.")
            fails = [line for line in output.splitlines() if line.startswith("FAIL")]
            if any(SPEC_CHECKED in m["content"] for m in msgs if m["role"] == "assistant"):
                fails.append(f"(expected values {SPEC_CHECKED})")
            detail = "\n".join(fails[:4]) or output.strip()[:300]
            total = f"{m.group(2)} of {int(m.group(1)) + int(m.group(2))} tests" if m else "the tests"
            return slip_text(ctx, StepKind.message, f"Version {version} fails {total}:\n{detail}")
        kept = re.search(r"Your tests from the last round:\n```python\n(.*?)\n?```", text, re.S)
        if kept:
            return slip_text(ctx, StepKind.tool_call, render_action("run_tests", kept.group(1),
                                                                      f"Running my tests again on version {version}.", code=True))
        family, p = design_params_for_tester("Design:\n" + design)
        calls = design_tests(design)
        spec = text.split("Spec: ", 1)[-1].split("\n\nDesign:\n", 1)[0] if text.startswith("Spec: ") else ""
        found = params_from_spec(spec) if spec else None
        checked = ""
        if found is not None and random.Random(stable_seed(ctx.config.seed, spec, "spec-tester")).random() < 0.5:
            # this tester works out the expected values from the spec itself, not from the design
            name = FUNCTION[found[0]].split("(")[0]
            calls = [re.sub(r"^\w+\(", f"{name}(", c) for c in calls]
            family, p = found[0], parse_design("Design:\n" + "\n".join(design_lines(*found)))[1]
            checked = f" {SPEC_CHECKED}"
        if family is None or not calls:
            return slip_text(ctx, StepKind.message, f"The design gives me nothing to test. Approved version {version}.")
        try:
            cases = expected(code_for(family, p), calls)
        except Exception as exc:  # the design itself does not make sense as code
            return slip_text(ctx, StepKind.message, f"I cannot work out what the design expects ({type(exc).__name__}); version {version} is not approved.")
        return slip_text(ctx, StepKind.tool_call, render_action("run_tests", expect_lines(cases),
                                                                  f"Testing version {version} on the {len(cases)} cases of the design{checked}.", code=True))


# ---------------------------------------------------------------- the LangGraph team

class TeamState(TypedDict, total=False):
    spec: str
    tests: str
    design: str
    versions: list[str]
    messages: list[str]
    report: str
    rounds: int
    submitted: str | None


def _rt(config) -> Runtime:
    return config["configurable"]["faultlens_runtime"]


def _architect(state: TeamState, config) -> dict:
    """The architect designs first and reviews last (one node, so one agent in the graph's spans)."""
    if state.get("design"):
        return _architect_review(state, config)
    rt = _rt(config)
    conv = Conversation().user(f"Spec: {state['spec']}\nWrite the design.")
    design = ""
    for _ in range(3):
        design = rt.ask("architect", conv.messages, kind=StepKind.plan)
        conv.assistant(design)
        action = parse_action(design)
        if action is None:
            break
        conv.user(f"Output of {action.tool}:\n{rt.act('architect', design)}")
    return {"design": design, "versions": [], "messages": [], "rounds": 0}


def _coder(state: TeamState, config) -> dict:
    rt = _rt(config)
    conv = Conversation().user(f"Spec: {state['spec']}\n\nDesign from the architect:\n{state['design']}")
    if state.get("messages"):
        conv.assistant(state["messages"][-1]).user(f"The tester's report:\n{state['report']}\nWrite the next version.")
    reply = ""
    for _ in range(3):
        reply = rt.ask("coder", conv.messages, kind=StepKind.message)
        conv.assistant(reply)
        action = parse_action(reply)
        if action is None:
            break
        conv.user(f"Output of {action.tool}:\n{rt.act('coder', reply)}")
    code = code_in(reply)
    return {"versions": [*state.get("versions", []), code or ""], "messages": [*state.get("messages", []), reply]}


def _tester(state: TeamState, config) -> dict:
    rt = _rt(config)
    k = len(state.get("versions", []))
    previous = f"Your tests from the last round:\n```python\n{state['tests']}\n```\n\n" if state.get("tests") else ""
    conv = Conversation().user(f"Spec: {state['spec']}\n\nDesign:\n{state['design']}\n\nVersion {k} from the coder:\n{state['messages'][-1]}\n\n{previous}"
                               "Write the tests as expect(<call>, <expected value>) lines and run them.")
    reply = rt.ask("tester", conv.messages, kind=StepKind.message)
    conv.assistant(reply)
    action = parse_action(reply)
    tests = state.get("tests", "")
    if action is not None:
        argument = action.argument
        if action.tool == "run_tests":
            tests = action.argument
            argument = f"{state['versions'][-1]}\n{TESTS_MARK}\n{action.argument}"
        output = rt.tool("tester", action.tool, argument)
        conv.user(f"Output of {action.tool}:\n{output}")
        reply = rt.ask("tester", conv.messages, kind=StepKind.message)
    return {"report": reply, "rounds": state.get("rounds", 0) + 1, "tests": tests}


def _after_tests(state: TeamState) -> str:
    if "Approved" in state.get("report", "") or state.get("rounds", 0) >= MAX_ROUNDS:
        return "architect"
    return "coder"


def _after_architect(state: TeamState) -> str:
    return "end" if "submitted" in state else "coder"


def _architect_review(state: TeamState, config) -> dict:
    rt = _rt(config)
    versions = state.get("versions", [])
    text = (f"Spec: {state['spec']}\nYour design:\n{state['design']}\n\nThe tester's last report:\n{state.get('report', '')}\n\n"
            f"Versions written: {len(versions)}. Reply 'Submit version <k>.' or explain why nothing can be submitted.")
    reply = rt.ask("architect", Conversation().user(text).messages, kind=StepKind.final_answer)
    m = _SUBMIT.search(reply)
    submitted = None
    if m and 1 <= int(m.group(1)) <= len(versions):
        submitted = versions[int(m.group(1)) - 1] or None
    return {"submitted": submitted}  # the key is set (maybe to None): the review is done


_GRAPH = None


def graph():
    """The compiled LangGraph team (built once; the runtime travels in the config)."""
    global _GRAPH
    if _GRAPH is None:
        from langgraph.graph import END, START, StateGraph

        g = StateGraph(TeamState)
        g.add_node("architect", _architect)
        g.add_node("coder", _coder)
        g.add_node("tester", _tester)
        g.add_edge(START, "architect")
        g.add_conditional_edges("architect", _after_architect, {"coder": "coder", "end": END})
        g.add_edge("coder", "tester")
        g.add_conditional_edges("tester", _after_tests, {"coder": "coder", "architect": "architect"})
        _GRAPH = g.compile()
    return _GRAPH


# ---------------------------------------------------------------- the environment

_PROMPTS = {
    "architect": ("You are the architect of a small software team (architect, coder, tester). Given a spec, reply with a design: "
                  "'Design:', then '- function: <name>(<args>)', one '- <key>: <rule>' line per rule of the spec (thresholds, "
                  "rates, rounding, '- invalid: ... raises ValueError'), '- tests: <call>; <call>; ...' (the calls the tester "
                  "must check, boundaries first) and '- workflow: ...'. At the end you get the tester's report: reply "
                  "'Submit version <k>.' for the version the tester approved, or explain why nothing can be submitted."),
    "coder": ("You are the coder of a small software team. Implement the architect's design as one plain Python function "
              "(standard library only). Reply 'Version <k>:' and the code in a ```python block. You may first check that it "
              "compiles with 'Action: check_syntax' followed by the code. After a failed test run, fix the code and reply "
              "with the next version."),
    "tester": ("You are the tester of a small software team. For each call in the design's '- tests:' line, work out from the "
               "design what it must return (or which exception it raises) and run them with 'Action: run_tests' followed by "
               "a ```python block of lines expect(\"<call>\", <expected value or exception class>). Then report: "
               "'All N tests pass on version k. Approved.' or 'Version k fails M of N tests:' and the failures."),
}


@register
class CodeTeam(Environment):
    name = "code_team"
    stands_in_for = "code with tests (HumanEval, MBPP)"
    modality = "text"
    topology = "multi"
    description = "a LangGraph team (architect, coder, tester) writes a Python function from a spec; hidden tests judge it"
    agents = [
        AgentInfo(name="architect", role="orchestrator", description="designs the function, submits the approved version"),
        AgentInfo(name="coder", role="worker", description="writes the function from the design"),
        AgentInfo(name="tester", role="checker", description="tests the code against the design"),
    ]
    tools = {
        "run_tests": ToolSpec("run_tests", "run expect(...) lines against the latest version in a subprocess (10 s limit)",
                              "tests", run_tests_tool),
        "check_syntax": ToolSpec("check_syntax", "compile Python code without running it", "code", check_syntax),
        "spec_examples": ToolSpec("spec_examples", "worked examples from the spec's owner for a function name", "function",
                                  lambda argument, task: spec_examples(argument, task)),
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        rng = random.Random(seed)
        out = []
        for i in range(n):
            family = FAMILIES[(i + seed) % len(FAMILIES)]
            p = make_params(family, rng)
            spec = spec_text(family, p)
            true_design = "Design:\n" + "\n".join(design_lines(family, p))
            _, dp = parse_design(true_design)
            hidden = expected(code_for(family, dp), test_inputs(family, p, None))
            typical = [case for case in hidden if not isinstance(case[1], type)][-2:]
            examples = "\n".join(f"{call} -> {value!r}" for call, value in typical)
            out.append(Task(id=f"code_team-{seed}-{i}", query=spec, reference_answer=code_for(family, dp),
                            metadata={"family": family, "params": p, "function": FUNCTION[family],
                                      "hidden_tests": expect_lines(hidden), "hidden_count": len(hidden), "examples": examples}))
        return out

    def system_prompt(self, agent: str, task: Task) -> str:
        return _PROMPTS[agent]

    def run(self, task: Task, *, tracer: Any = None, **kwargs: Any):
        # The graph's callbacks need the tracer; `Environment.run` only hands `program` the runtime.
        token = _TRACER.set(tracer)
        try:
            return super().run(task, tracer=tracer, **kwargs)
        finally:
            _TRACER.reset(token)

    def program(self, task: Task, rt: Runtime) -> str | None:
        config: dict[str, Any] = {"configurable": {"faultlens_runtime": rt}, "recursion_limit": 40}
        tracer = _TRACER.get()
        if tracer is not None:
            config["callbacks"] = [tracer.langgraph_handler(task=task)]
        final = graph().invoke({"spec": task.query}, config=config)
        return final.get("submitted")

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        if not answer:
            return Outcome(success=False, score=0.0, evaluator="code_team.hidden_tests", detail="no code was submitted")
        report = _hidden_report(task, answer)
        m = re.search(r"^(\d+) passed, (\d+) failed", report, re.M)
        total = int(task.metadata["hidden_count"])
        passed = int(m.group(1)) if m else 0
        ok = m is not None and int(m.group(2)) == 0 and passed == total
        return Outcome(success=ok, score=passed / total if total else 0.0, evaluator="code_team.hidden_tests",
                       detail=f"hidden tests: {report.splitlines()[0] if report else '(no output)'}"
                              + ("" if ok else "; " + "; ".join(report.splitlines()[1:3])))

    def policy(self) -> TeamPolicy:
        return TeamPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [[">=", ">"], ["merit", "pass", "fail"]]

    def mutators(self):
        return mistakes.MUTATORS


_HIDDEN_CACHE: dict[tuple[str, str], str] = {}


def _hidden_report(task: Task, code: str) -> str:
    """The hidden tests' report for `code` (one subprocess per distinct code; a replayed run reuses it)."""
    key = (task.id or "", code)
    if key not in _HIDDEN_CACHE:
        _HIDDEN_CACHE[key] = run_tests(f"{code}\n{TESTS_MARK}\n{task.metadata['hidden_tests']}")
    return _HIDDEN_CACHE[key]


__all__ = ["CodeTeam", "TeamPolicy", "graph"]
