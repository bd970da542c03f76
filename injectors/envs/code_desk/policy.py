"""The simulated agents of `code_desk`: functions of the chat request Strands sends for the lead and its agent tools.

Each agent's request holds its own conversation: its system prompt, its user
message (the spec for the lead; for an agent tool, the `input` the lead
wrote, which is all it sees) and its earlier turns with their `tool_calls`
and `role: "tool"` results. A competent team:

- **lead** (the orchestrator; its tools are the `coder` and `tester` agents)
  plans (its first reply's text: the design, one `- key: value` line per
  rule of the spec and a `- tests:` line of calls to check), gives the
  coder a brief with the design, gives the tester the design and the
  coder's code, and answers with the version the tester passes; after a
  failing report it sends the coder the design, the code and the report
  (three versions at most). It follows the design of its plan;
- **coder** (no tool) writes the function the design in its brief
  describes, in one ```python block;
- **tester** (tool `run_tests`) works out the expected values of the
  design's test calls from the design, runs them against the code
  (`run_tests`) and reports the result with `VERDICT: pass` or `fail`.

Recovered mistake (rate `noise`): the coder's first version misses the colon
of its `def` line (the tests do not load it, the tester fails it, the lead
sends it back and the next version is right).
"""

from __future__ import annotations

import random
import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..base import stable_seed
from ..code_team.env import design_params_for_tester, design_tests, params_from_spec
from ..code_team.world import code_for, design_lines, parse_design, test_inputs
from ..framework import chat_turn
from .world import code_of, tests_source

AGENTS = ("lead", "coder", "tester")
MEMBERS = ("coder", "tester")
MAX_VERSIONS = 3
TESTS_LISTED = 4  # of the 6 to 12 probes of a spec (the hidden tests run them all)
VERDICT = re.compile(r"^VERDICT: (pass|fail)\s*$", re.M)
PLAN_HEAD = ("Plan: the coder writes the function from this design, the tester runs the design's tests on it, and I "
             "answer with the version that passes.")


def listed_tests(calls: list[str], rng: random.Random) -> list[str]:
    """The calls a design lists for the tester: a few of the probes, in their order (a lead does not list them all)."""
    return [calls[i] for i in sorted(rng.sample(range(len(calls)), min(TESTS_LISTED, len(calls))))]


def design_text(family: str, params: dict[str, Any], tests: list[str]) -> str:
    return "\n".join(["Design:", *design_lines(family, params), f"- tests: {'; '.join(tests)}"])


def design_in(text: str) -> str:
    """The design a reply or a brief holds (from its `Design:` line to the end of the design's lines)."""
    start = text.find("Design:")
    if start < 0:
        return ""
    lines = text[start:].splitlines()
    end = next((i for i, line in enumerate(lines[1:], 1) if not line.startswith("- ")), len(lines))
    return "\n".join(lines[:end])


def coder_brief(design: str) -> str:
    return f"Implement this design as one Python function, in one ```python block.\n{design}"


def fix_brief(design: str, code: str, report: str) -> str:
    return (f"Fix the code so that the design's tests pass.\n{design}\nThe code:\n```python\n{code}\n```\n"
            f"The tester's report:\n{report.strip()}")


def tester_brief(design: str, code: str) -> str:
    return f"Run the design's tests on this code and report the result.\n{design}\nThe code:\n```python\n{code}\n```"


class TeamPolicy:
    """The simulated lead, coder and tester: `respond(agent, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls = wire.history(messages, wire.Call)
        if agent == "lead":
            return self.lead(user, calls)
        if agent == "coder":
            return self.coder(user, chance)
        if agent == "tester":
            return self.tester(user, calls)
        raise ValueError(f"code_desk: no simulated agent {agent!r}")

    # -- lead ----------------------------------------------------------------------------
    @staticmethod
    def lead(spec: str, calls: list[wire.Call]) -> str:
        delegations = [c for c in calls if c.tool in MEMBERS]
        if not delegations:
            found = params_from_spec(spec)
            if found is None:
                return "I cannot read the spec."
            family, params = found
            tests = listed_tests(test_inputs(family, params, None), random.Random(stable_seed("code_desk", spec)))
            design = design_text(family, params, tests)
            return render_call("coder", {"input": coder_brief(design)}, f"{PLAN_HEAD}\n{design}")
        design = design_in(delegations[0].thought)  # the plan, once made, is what the lead follows
        versions = [c for c in delegations if c.tool == "coder"]
        last = delegations[-1]
        if last.tool == "coder":
            code = code_of(last.result)
            if code is None:
                if len(versions) >= MAX_VERSIONS:
                    return "The coder wrote no code."
                return render_call("coder", {"input": coder_brief(design)}, "The reply holds no code; I ask again.")
            return render_call("tester", {"input": tester_brief(design, code)}, f"Version {len(versions)} is written; "
                               "the tester runs the design's tests on it.")
        code = code_of(str(last.args.get("input", ""))) or ""
        verdict = VERDICT.search(last.result or "")
        if verdict is not None and verdict.group(1) == "pass":
            return f"The tester passed version {len(versions)}.\n```python\n{code}\n```"
        if len(versions) >= MAX_VERSIONS:
            return f"No version passed the tests after {len(versions)} tries."
        return render_call("coder", {"input": fix_brief(design, code, last.result or "")},
                           f"Version {len(versions)} fails the tests; the coder fixes it.")

    # -- coder ---------------------------------------------------------------------------
    @staticmethod
    def coder(brief: str, chance) -> str:
        family, params = parse_design(design_in(brief))
        if family is None:
            return "The brief holds no design I can implement."
        code = code_for(family, params)
        if brief.startswith("Implement") and chance("def-without-colon"):
            code = re.sub(r"^(def .+\)):$", r"\1", code, count=1, flags=re.M)
        return f"```python\n{code}\n```"

    # -- tester --------------------------------------------------------------------------
    @staticmethod
    def tester(brief: str, calls: list[wire.Call]) -> str:
        design, code = design_in(brief), code_of(brief)
        family, params = design_params_for_tester(design)
        if family is None or code is None:
            return "The brief holds no design or no code to test.\nVERDICT: fail"
        runs = [c for c in calls if c.tool == "run_tests"]
        if not runs:
            source = tests_source(code, design_tests(design), code_for(family, params))
            return render_call("run_tests", {"source": source})
        report = (runs[-1].result or "").strip()
        ok = re.match(r"^\d+ passed, 0 failed", report) is not None
        return f"{report}\nVERDICT: {'pass' if ok else 'fail'}"
