"""The simulated agents of the Magentic-One team: what the orchestrator, web surfer, coder and executor answer, given only their conversation."""

from __future__ import annotations

import json
import re
from typing import Any

from faultlens.middleware.replay.session import canonical

from ..base import stable_seed
from ..framework import message_text
from .tasks import (Derive, Key, Lookup, code_for, derive_line, figure, figure_line, lookup_line, lookups_for, read_derive, read_figures,
                    read_lookups, read_question, years_text)
from .wire import CODE, LEDGER_HEAD, ORCHESTRATOR, ORCHESTRATOR_AGENT, REPLAN_HINT, is_error_output, orchestrator_kind


class MagenticPolicy:
    """The simulated orchestrator, web surfer and coder: functions of the request AutoGen sends."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str | list[tuple[str, str]]:
        messages = [dict(m, content=message_text(m.get("content"))) for m in request.get("messages") or []]
        key = canonical([m["content"] for m in messages])

        def chance(label: str) -> bool:
            noise = float(sim.get("noise", 0.0))
            return noise > 0 and stable_seed(sim.get("seed", 0), agent, key, label) % 10_000 / 10_000 < noise

        if agent == ORCHESTRATOR_AGENT:
            kind = orchestrator_kind(request)
            if kind == "facts":
                return self.facts(messages)
            if kind == "plan":
                return self.plan(messages)
            if kind == "ledger":
                return self.ledger(messages)
            if kind == "final":
                return self.final(messages)
            raise ValueError(f"magentic_team: an orchestrator request the policy does not know: {messages[-1]['content'][:80]!r}")
        if agent == "web_surfer":
            return self.surf(messages, chance)
        if agent == "coder":
            return self.code(messages, chance)
        raise ValueError(f"magentic_team: no simulated agent {agent!r}")

    # -- the orchestrator -----------------------------------------------------
    @staticmethod
    def _question(messages: list[dict[str, Any]]) -> str:
        text = messages[-1]["content"]
        for head, tail in (("Here is the request:\n\n", "\n\nHere is the pre-survey"),
                           ("we are working to solve the following task:\n\n", "\n\nIt's clear")):
            if head in text:
                return text.split(head, 1)[1].split(tail, 1)[0]
        return messages[0]["content"]

    def facts(self, messages: list[dict[str, Any]]) -> str:
        question = self._question(messages)
        hint = ""
        if "Please rewrite the following fact sheet" in messages[-1]["content"]:
            hint = f"\n{REPLAN_HINT}"
        d = read_question(question)
        if d is None:
            return "1. GIVEN OR VERIFIED FACTS\n- None.\n\n2. FACTS TO LOOK UP\n- None.\n\n3. FACTS TO DERIVE\n- None.\n\n4. EDUCATED GUESSES\n- None."
        looks = lookups_for(d)
        guesses = [figure_line(k, f"about {_guess(k)}") for l in looks for k in _keys(l)]
        return ("1. GIVEN OR VERIFIED FACTS\n"
                f"- The request is about {' and '.join(d.companies)} in {years_text(d.years)}.\n\n"
                "2. FACTS TO LOOK UP\n" + "".join(f"- {lookup_line(l)}, on the annual-report site.\n" for l in looks) +
                "\n3. FACTS TO DERIVE\n" + f"- {derive_line(d)}.\n\n"
                "4. EDUCATED GUESSES\n" + "\n".join(guesses) + hint)

    def plan(self, messages: list[dict[str, Any]]) -> str:
        facts = next((m["content"] for m in reversed(messages) if m.get("role") == "assistant"), "")
        looks, d = read_lookups(facts.split("3. FACTS TO DERIVE")[0]), read_derive(facts)
        lines = [f"- web_surfer: {lookup_line(l)} on the annual-report site and report each figure." for l in looks]
        if d is not None:
            lines += [f"- coder: {derive_line(d)}, from the figures web_surfer reports.",
                      "- executor: run the coder's code and show the printed value."]
        lines.append("- Answer with the printed value.")
        return "\n".join(lines)

    @staticmethod
    def _since_ledger(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """The task ledger text and the messages after it (without the final prompt)."""
        for i in range(len(messages) - 1, -1, -1):
            if messages[i]["content"].startswith(LEDGER_HEAD):
                return messages[i]["content"], messages[i + 1: -1]
        return "", messages[:-1]

    def ledger(self, messages: list[dict[str, Any]]) -> str:
        ledger, thread = self._since_ledger(messages)
        plan = ledger.split("Here is the plan to follow as best as possible:", 1)[-1]
        speaker, instruction, satisfied, reason = self.next_move(plan, thread)
        last = thread[-1] if thread else {}
        # A web surfer turn that reports no figure at all is no progress (AutoGen then re-plans).
        stalled = (not satisfied and last.get("name") == "web_surfer" and not read_figures(last["content"]))
        answer = {
            "is_request_satisfied": {"reason": reason if satisfied else "The requested value has not been computed yet.",
                                     "answer": satisfied},
            "is_in_loop": {"reason": "Each turn has asked for something new.", "answer": False},
            "is_progress_being_made": ({"reason": "The web surfer's last turn brought no figure.", "answer": False} if stalled
                                       else {"reason": "The last turn added what was asked for.", "answer": True}),
            "next_speaker": {"reason": "This is the next step of the plan.", "answer": speaker},
            "instruction_or_question": {"reason": "What this team member needs to do the step.", "answer": instruction},
        }
        return json.dumps(answer, indent=4)

    @staticmethod
    def next_move(plan: str, thread: list[dict[str, Any]]) -> tuple[str, str, bool, str]:
        """(next speaker, instruction, satisfied, reason) from the plan and the conversation since the ledger."""
        said = [(m.get("name") or ("orchestrator" if m.get("role") == "assistant" else "user"), m["content"]) for m in thread]
        instructions = [text for who, text in said if who == "orchestrator"]
        coder_at = max((i for i, (who, _) in enumerate(said) if who == "coder"), default=-1)
        if coder_at >= 0:
            code = CODE.search(said[coder_at][1])
            after = [text for who, text in said[coder_at + 1:] if who == "executor"]
            if code is None:
                return "coder", "", True, "The coder has stated the value."
            if after and not is_error_output(after[-1]):
                return "executor", "", True, "The executor has printed the computed value."
            failures = sum(1 for who, text in said if who == "executor" and is_error_output(text))
            if after and failures >= 2:
                return "executor", "", True, "The code keeps failing; answering with what we have."
            if after:
                last = after[-1].strip().splitlines()[-1]
                return "coder", f"The code failed with: {last}\nPlease fix the code and print the result.", False, ""
            if "executor:" not in plan:
                return "coder", "", True, "The coder has written the code for the computation."
            return "executor", "Please run the code the coder just wrote.", False, ""
        if len(instructions) >= 10:
            return "web_surfer", "", True, "We have run out of turns; answering with what we have."
        figures: dict[Key, float] = {}
        for who, text in said:
            if who == "web_surfer":
                figures.update(read_figures(text))
        for look in read_lookups(plan):
            missing = [k for k in _keys(look) if k not in figures]
            tries = sum(1 for text in instructions if lookup_line(look) in text)
            if missing and tries < 2:
                return ("web_surfer", f"Please {lookup_line(look)} on the annual-report site and report each figure as "
                        "'- Company, metric, year: value'.", False, "")
        d = read_derive(plan)
        if d is None or "coder:" not in plan:
            return "web_surfer", "", True, "The plan has no further step."
        needed = [k for l in lookups_for(d) for k in _keys(l)]
        shown = "\n".join(figure_line(k, _show(figures[k])) for k in needed if k in figures)
        return "coder", f"Please write Python code to {derive_line(d)}, from these figures:\n{shown}", False, ""

    def final(self, messages: list[dict[str, Any]]) -> str:
        ledger, thread = self._since_ledger(messages)
        value = None
        for m in reversed(thread):
            if m.get("name") == "executor" and not is_error_output(m["content"]) and m["content"].strip():
                value = m["content"].strip().splitlines()[-1].strip()
                break
            if m.get("name") == "coder" and CODE.search(m["content"]) is None:
                found = re.findall(r"-?\d+(?:\.\d+)?", m["content"])
                value = found[-1] if found else None
                break
        if value is None:
            d = read_derive(ledger.split("Here is the plan to follow as best as possible:", 1)[-1]) or read_question(ledger)
            guesses = read_figures(ledger, guesses=True)
            if d is not None and all(k in guesses for l in lookups_for(d) for k in _keys(l)):
                value = _evaluate(d, guesses)
        if value is None:
            return "The team could not determine the value.\nANSWER: unknown"
        return f"Based on the team's work, the requested value is {value}.\nANSWER: {value}"

    # -- the web surfer -------------------------------------------------------
    def surf(self, messages: list[dict[str, Any]], chance) -> str | list[tuple[str, str]]:
        at = max((i for i, m in enumerate(messages) if m.get("name") == ORCHESTRATOR), default=-1)
        instruction = messages[at]["content"] if at >= 0 else ""
        looks = read_lookups(instruction)
        if not looks:
            return "I could not tell from the instruction which figures to look up."
        turn = messages[at + 1:]
        calls = {c["id"]: (c["function"]["name"], _arguments(c["function"]["arguments"]))
                 for m in turn if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
        results = [(calls.get(m.get("tool_call_id"), ("", {})), m["content"]) for m in turn if m.get("role") == "tool"]
        wanted = [(l.company, y) for l in looks for y in l.years]
        pages = [(args.get("url", ""), text) for (name, args), text in results if name == "open_page"]
        if pages:
            # Each opened page is read as the (company, year) it was opened for, in order.
            lines, lost = [], []
            for (company, year), (url, text) in zip(wanted, pages):
                for look in looks:
                    if look.company != company or year not in look.years:
                        continue
                    m = (re.search(r"revenue of \$(\d+(?:\.\d+)?) million", text) if look.metric == "revenue"
                         else re.search(r"headcount of (\d+) employees", text))
                    if m is None:
                        lost.append(f"{company} {year} ({url})")
                    else:
                        lines.append(figure_line((company, look.metric, year), m.group(1)))
            head = "I searched the annual-report site and opened the report pages."
            tail = f"\nI could not read: {', '.join(lost)}." if lost else ""
            return f"{head} The figures:\n" + "\n".join(lines) + tail
        searches = [text for (name, _), text in results if name == "search"]
        company = looks[0].company
        if not searches:
            query = f"{company.split()[0]} reports" if chance("short-query") else f"{company} annual report"
            return [("search", json.dumps({"query": query}))]
        listing = searches[-1]
        if REPLAN_HINT not in "".join(m["content"] for m in messages) and company in listing and chance("summary-only"):
            # It stops at the search listing instead of opening the pages: no figures (the orchestrator re-plans).
            return f"The search lists the annual reports of {company}; the figures are in those reports."
        if listing.startswith("No results") or company not in listing:
            return [("search", json.dumps({"query": f"{company} annual report"}))]
        urls = []
        for c, y in wanted:
            m = re.search(rf"^- {re.escape(c)}: annual report {y} - (\S+)$", listing, re.M)
            if m is not None:
                urls.append(m.group(1))
        return [("open_page", json.dumps({"url": u})) for u in urls] or "The search listed no report pages for those years."

    # -- the coder ------------------------------------------------------------
    def code(self, messages: list[dict[str, Any]], chance) -> str:
        at = max((i for i, m in enumerate(messages) if m.get("name") == ORCHESTRATOR), default=-1)
        instruction = messages[at]["content"] if at >= 0 else ""
        ledger = next((m["content"] for m in messages if m["content"].startswith(LEDGER_HEAD)), "")
        d = read_derive(instruction)
        fixing = "Please fix the code" in instruction
        if d is None:
            # A fix request or an instruction without the computation: the plan says what to compute.
            d = read_derive(ledger.split("Here is the plan to follow as best as possible:", 1)[-1]) or read_question(ledger)
        if d is None:
            return "I cannot tell what to compute from the instruction."
        source = instruction
        if fixing:
            source = next((m["content"] for m in reversed(messages[:at]) if m.get("name") == ORCHESTRATOR
                           and read_derive(m["content"]) is not None), instruction)
        values = read_figures(source)
        guesses = read_figures(ledger, guesses=True)
        values.update({k: v for k, v in guesses.items() if k not in values})  # missing figures: the fact sheet's guesses
        if "no need to run" in instruction:
            rough = {k: float(f"{v:.2g}") for k, v in values.items()}
            return f"Working it out from the figures, the value is about {_evaluate(d, rough)}."
        written = [m for m in messages if m.get("role") == "assistant" and CODE.search(m["content"])]
        slip = not written and not fixing and chance("slip")
        head = "Here is the corrected code." if fixing else "Here is the code."
        return f"{head}\n```python\n{code_for(d, values, slip=slip)}\n```"


def _arguments(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _keys(look: Lookup) -> list[Key]:
    return [(look.company, look.metric, y) for y in look.years]


def _guess(key: Key) -> int:
    value = float(figure(*key))
    return int(round(value, -2) + 25) if key[1] == "revenue" else int(round(value, -3) + 250)


def _show(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def _evaluate(d: Derive, values: dict[Key, float]) -> str | None:
    scope: dict[str, Any] = {}
    try:
        exec(code_for(d, values).replace("print(result)", ""), {}, scope)
    except Exception:
        return None
    return str(scope["result"])
