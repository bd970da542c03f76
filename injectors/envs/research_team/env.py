"""`research_team`: an orchestrator/workers team answers multi-hop questions over a fictional corpus.

Each task comes with its own corpus of 12 short generated documents about
fictional towns, people and companies (`task.metadata["docs"]`), and a
question that needs two or three look-ups ("How many people work at the
company founded by the mayor of Velmora?") or a look-up and a calculation.

Agents and the protocol (the simulated policies follow it; real LLM agents
get it in their prompts):

- planner (orchestrator): writes a numbered plan (`1. searcher: find the mayor
  of Velmora`, `2. searcher: find the company founded by #1`, ...), then, one
  step at a time, delegates (`searcher: find the company founded by Marta
  Voss`), resolving `#k` with the k-th verified finding. A delegation to an
  agent that does not exist is reported back and skipped.
- searcher: calls `search` and hands the results to the reader naming the
  document it found for the entity it searched for; if no document has that
  title it searches again (a mistyped query is recovered this way).
- reader: reads the named document and reports `The <relation> of <entity> is
  <value> (source Dk).`
- calculator: evaluates an expression with `calculate` and reports it.
- verifier: checks that the reported value appears in the cited source (or the
  tool output); if it does not, it corrects it from the source. It does not
  check that the source is the right document: that is the gap through which
  some errors pass, while misread values are caught.
- answerer: gives `Answer: <value>` from the finding the planner names.

Recovered mistakes in seeds (rate `noise`): the searcher mistypes the entity
and searches again; the reader misreads a value and the verifier corrects it.
"""

from __future__ import annotations

import random
import re

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task

from faultlens.injectors.generators import perturb_number, slip_text
from ..registry import register
from ..arithmetic import calculate
from ..base import (
    Conversation,
    Environment,
    Runtime,
    ToolSpec,
    parse_action,
    render_action,
)
from . import mistakes
from .world import CO_B, LAST, TOWN_B

FIRST = ["Marta", "Ivo", "Lena", "Tomas", "Anka", "Bruno", "Cira", "Dario", "Elsa", "Fenn", "Greta", "Hollis", "Ines",
         "Jorin", "Kasia", "Levin", "Mirela", "Nils", "Odile", "Pavel", "Runa", "Sven", "Talia", "Udo"]


TOWN_A = ["Vel", "Ost", "Kar", "Bel", "Tor", "Mir", "Sal", "Dun", "Ash", "Rav", "Lun", "Hal", "Bren", "Cor", "Fen", "Gal"]


CO_A = ["Kelvara", "Duna", "Orrin", "Talvik", "Brisk", "Halden", "Norvel", "Quarry", "Sable", "Vantor", "Elm", "Corvid"]


PRODUCTS = ["canned fish", "bicycle frames", "wool blankets", "glass lenses", "garden tools", "ceramic tiles",
            "solar panels", "rye beer", "paper", "ship rope"]
VALLEYS = ["Ardent", "Silver", "Hollow", "Northern", "Amber", "Quiet"]

RELATIONS = {
    # relation phrase: (search keyword, regex capturing the value in the entity's document)
    "mayor": ("mayor", r"Its mayor is ([A-Z][a-z]+ [A-Z][a-z]+),"),
    "company founded by": ("founded", r"founded ([A-Z][a-z]+ [A-Z][a-z]+), and"),
    "number of employees of": ("employs", r"employs ([\d,]+) people"),
    "population of": ("population", r"population of ([\d,]+)"),
    "birthplace of": ("born", r"was born in ([A-Z][a-z]+)\."),
    "founding year of": ("founded", r"was founded in (\d{4})"),
}
_REL_PHRASE = {"mayor": "mayor of"}


def relation_text(rel: str) -> str:
    return _REL_PHRASE.get(rel, rel)


_INSTRUCTION = re.compile(r"find the (mayor of|company founded by|number of employees of|population of|birthplace of|founding year of) (.+?)\s*$")


def parse_find(instruction: str) -> tuple[str, str] | None:
    m = _INSTRUCTION.search(instruction.strip())
    if m is None:
        return None
    rel = "mayor" if m.group(1) == "mayor of" else m.group(1)
    return rel, m.group(2).strip().rstrip(".")


# ---------------------------------------------------------------- corpus and tasks

def _fmt(n: int) -> str:
    return f"{n:,}"


def make_corpus(rng: random.Random) -> dict:
    towns = rng.sample([a + b for a in TOWN_A for b in TOWN_B], 4)
    names = rng.sample([f"{f} {l}" for f in FIRST for l in LAST], 8)
    people, predecessors = names[:4], names[4:]
    companies = rng.sample([f"{a} {b}" for a in CO_A for b in CO_B], 4)
    docs, facts = [], {}
    for i, town in enumerate(towns):
        mayor, pred = people[i], predecessors[i]
        pop = rng.randrange(2_000, 90_000)
        year = rng.randrange(1998, 2020)
        facts[town] = {"mayor": mayor, "population of": pop}
        docs.append((town, f"{town} is a town in the {rng.choice(VALLEYS)} valley. Its mayor is {mayor}, who took over "
                           f"from {pred} in {year}. {town} has a population of {_fmt(pop)}."))
    founded = rng.sample(range(1950, 2015), 4)
    for i, person in enumerate(people):
        company, other = companies[i], companies[(i + 1) % 4]
        born = towns[(i + 1 + rng.randrange(3)) % 4]
        facts[person] = {"company founded by": company, "birthplace of": born}
        docs.append((person, f"{person} was born in {born}. In {founded[i]}, {person} founded {company}, and later "
                             f"joined the board of {other}."))
    for i, company in enumerate(companies):
        employees = rng.randrange(40, 9_000)
        facts[company] = {"number of employees of": employees, "founding year of": founded[i]}
        docs.append((company, f"{company} makes {rng.choice(PRODUCTS)}. It was founded in {founded[i]} and employs "
                              f"{_fmt(employees)} people. Its main rival is {companies[(i + 2) % 4]}."))
    order = list(range(len(docs)))
    rng.shuffle(order)
    out = [{"id": f"D{k + 1}", "title": docs[j][0], "text": docs[j][1]} for k, j in enumerate(order)]
    return {"docs": out, "facts": facts, "towns": towns, "people": people, "predecessors": predecessors,
            "companies": companies}


def _question(rng: random.Random, kind: str, corpus: dict) -> tuple[str, list[str], str]:
    facts, towns = corpus["facts"], corpus["towns"]
    town = rng.choice(towns)
    mayor = facts[town]["mayor"]
    company = facts[mayor]["company founded by"]
    if kind == "company":
        return (f"Which company was founded by the mayor of {town}?",
                [f"searcher: find the mayor of {town}", "searcher: find the company founded by #1", "answerer: answer with #2"],
                company)
    if kind == "employees":
        return (f"How many people work at the company founded by the mayor of {town}?",
                [f"searcher: find the mayor of {town}", "searcher: find the company founded by #1",
                 "searcher: find the number of employees of #2", "answerer: answer with #3"],
                str(facts[company]["number of employees of"]))
    if kind == "birthplace":
        return (f"In which town was the mayor of {town} born?",
                [f"searcher: find the mayor of {town}", "searcher: find the birthplace of #1", "answerer: answer with #2"],
                facts[mayor]["birthplace of"])
    a, b = rng.sample(towns, 2)
    if facts[a]["population of"] < facts[b]["population of"]:
        a, b = b, a
    return (f"How many more residents does {a} have than {b}?",
            [f"searcher: find the population of {a}", f"searcher: find the population of {b}",
             "calculator: compute #1 - #2", "answerer: answer with #3"],
            str(facts[a]["population of"] - facts[b]["population of"]))


# ---------------------------------------------------------------- tools

def search(query: str, task: Task) -> str:
    """Rank the task's documents by word overlap with the query (title words count triple)."""
    words = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if len(w) > 2]
    scored = []
    for doc in task.metadata["docs"]:
        title = doc["title"].lower().split()
        text = re.findall(r"[a-z0-9]+", doc["text"].lower())
        score = sum(3 * (w in title) + (w in text) for w in words)
        if any(w in title for w in words):
            scored.append((-score, int(doc["id"][1:]), doc))
    if not scored:
        return "No documents matched."
    scored.sort(key=lambda s: (s[0], s[1]))
    return "\n".join(f"[{d['id']}] {d['title']}: {d['text']}" for _, _, d in scored[:3])


# ---------------------------------------------------------------- simulated agents

_DOC = re.compile(r"^\[(D\d+)\] ([^:]+): (.*)$", re.M)
_FINDING = re.compile(r"(?:Confirmed|Corrected|Unverified): the (.+?) is (.+?)\.$", re.M)
_PLAN_LINE = re.compile(r"^(\d+)\. (\w+): (.+)$", re.M)
_RESULT = re.compile(r"^Result of step (\d+): (.*)$", re.M)


def docs_in(text: str) -> list[tuple[str, str, str]]:
    return _DOC.findall(text)


def extract(rel: str, doc_text: str) -> str | None:
    m = re.search(RELATIONS[rel][1], doc_text)
    return m.group(1) if m else None


def _misread(value: str, rng: random.Random) -> str:
    if re.fullmatch(r"[\d,]+", value):
        return perturb_number(value, rng)
    parts = value.split(" ")
    if len(parts) == 2:
        return f"{parts[0]} {rng.choice([l for l in LAST if l != parts[1]])}"
    return value[:-1] + ("a" if value[-1] != "a" else "e")


class TeamPolicy:
    """The simulated team: one method per agent, each reading only its conversation."""

    def respond(self, ctx) -> str:
        return getattr(self, ctx.agent)(ctx)

    # planner ----------------------------------------------------------
    def planner(self, ctx) -> str:
        msgs = ctx.messages
        assistant = [m["content"] for m in msgs if m["role"] == "assistant"]
        question = ctx.task_text.split("Question: ", 1)[-1].split("\n", 1)[0]
        if not assistant:
            lines = plan_for(question)
            text = "Plan:\n" + "\n".join(f"{i + 1}. {line}" for i, line in enumerate(lines))
            return slip_text(ctx, StepKind.plan, text)
        plan = _PLAN_LINE.findall(assistant[0])
        step_no = len(assistant)  # one delegation per plan line, in order
        results = {int(k): v for k, v in _RESULT.findall("\n".join(m["content"] for m in msgs if m["role"] == "user"))}
        if step_no > len(plan):
            last = max(results) if results else 0
            return slip_text(ctx, StepKind.message, f"answerer: answer with #{last}")
        _, agent, instruction = plan[step_no - 1]

        def resolve(m: re.Match) -> str:
            found = _FINDING.search(results.get(int(m.group(1)), ""))
            return found.group(2) if found else f"#{m.group(1)}"

        if agent == "answerer":
            text = f"answerer: {instruction}"
        else:
            text = agent + ": " + re.sub(r"#(\d+)", resolve, instruction)
        return slip_text(ctx, StepKind.message, text)

    # searcher ---------------------------------------------------------
    def searcher(self, ctx) -> str:
        instruction = ctx.task_text.split("\n", 1)[0]
        parsed = parse_find(instruction)
        if parsed is None:
            return slip_text(ctx, StepKind.message, "Nothing to search for in this instruction.")
        rel, entity = parsed
        msgs = ctx.messages
        tried = [parse_action(m["content"]) for m in msgs if m["role"] == "assistant"]
        actions = [a for a in tried if a is not None]
        keyword = RELATIONS[rel][0]
        if not actions:
            query = entity
            if ctx.noise("query") and len(entity) > 4:
                i = ctx.rng("typo").randrange(1, len(entity) - 2)
                query = entity[:i] + entity[i + 1:]  # a dropped letter, caught when no title matches
            return slip_text(ctx, StepKind.tool_call, render_action("search", f"{query} {keyword}"))
        last = actions[-1]
        output = msgs[-1]["content"]
        searched = last.argument.rsplit(" ", 1)[0] if last.tool == "search" else ""
        docs = docs_in(output)
        hit = [d for d in docs if d[1] == searched]
        if not hit and len(actions) < 3:
            return slip_text(ctx, StepKind.tool_call, render_action("search", f"{entity} {keyword}", "Let me search again."))
        target = hit[0] if hit else (docs[0] if docs else None)
        if target is None:
            return slip_text(ctx, StepKind.message, f"reader: the search found no document about {entity}.")
        return slip_text(ctx, StepKind.message, f"reader: see {target[0]} ({target[1]}) for the {relation_text(rel)} {entity}.")

    # reader -----------------------------------------------------------
    def reader(self, ctx) -> str:
        text = ctx.task_text
        instruction = text.split("\n", 1)[0].removeprefix("Instruction: ")
        parsed = parse_find(instruction)
        docs = docs_in(text)
        named = re.search(r"see (D\d+)", text)
        if parsed is None or not docs:
            return slip_text(ctx, StepKind.message, "Not found: I have no document to read for this.")
        rel, entity = parsed
        doc = next((d for d in docs if named and d[0] == named.group(1)), docs[0])
        value = extract(rel, doc[2])
        if value is None:
            return slip_text(ctx, StepKind.message, f"Not found: {doc[0]} does not give the {relation_text(rel)} {entity}.")
        if ctx.noise("misread"):
            value = _misread(value, ctx.rng("misread"))  # recovered: the verifier corrects it from the source
        return slip_text(ctx, StepKind.message, f"The {relation_text(rel)} {entity} is {value} (source {doc[0]}).")

    # calculator -------------------------------------------------------
    def calculator(self, ctx) -> str:
        instruction = ctx.task_text.split("\n", 1)[0]
        expr = re.search(r"compute (.+)$", instruction)
        msgs = ctx.messages
        if msgs[-1]["role"] == "user" and len(msgs) == 2:
            if expr is None or not re.fullmatch(r"[\d,.\s+\-*/()]+", expr.group(1)):
                return slip_text(ctx, StepKind.message, "I can only evaluate arithmetic expressions; there is nothing for me to compute here.")
            return slip_text(ctx, StepKind.tool_call, render_action("calculate", expr.group(1).replace(",", "")))
        output = msgs[-1]["content"].split("\n", 1)[-1].strip()
        action = parse_action(msgs[-2]["content"])
        if not re.fullmatch(r"-?[\d.]+", output) or action is None:
            return slip_text(ctx, StepKind.message, "I could not compute this.")
        return slip_text(ctx, StepKind.message, f"{action.argument} = {output}")

    # verifier ---------------------------------------------------------
    def verifier(self, ctx) -> str:
        text = ctx.task_text
        instruction = text.split("\n", 1)[0].removeprefix("Instruction: ")
        report = re.search(r"^Report: (.*)$", text, re.M)
        report_text = report.group(1) if report else ""
        evidence = text.split("Evidence:\n", 1)[-1] if "Evidence:\n" in text else ""
        calc = re.match(r"compute (.+)$", instruction)
        if calc:
            m = re.search(r"= (-?[\d.]+)$", report_text)
            if m is None:
                return slip_text(ctx, StepKind.message, f"Unverified: the result of {calc.group(1)} is unknown.")
            value = m.group(1)
            ok = re.fullmatch(r"-?[\d.]+", evidence.strip() or "x") and evidence.strip() == value
            if not ok and re.fullmatch(r"-?[\d.]+", evidence.strip() or "x"):
                return slip_text(ctx, StepKind.message, f"Corrected: the result of {calc.group(1)} is {evidence.strip()}.")
            return slip_text(ctx, StepKind.message, f"Confirmed: the result of {calc.group(1)} is {value}.")
        parsed = parse_find(instruction)
        m = re.search(r" is (.+?) \(source (D\d+)\)\.$", report_text)
        if parsed is None or m is None:
            return slip_text(ctx, StepKind.message, "Unverified: the reader reported nothing I can check.")
        rel, entity = parsed
        value, source = m.group(1), m.group(2)
        doc = next((d for d in docs_in(evidence) if d[0] == source), None)
        phrase = f"{relation_text(rel)} {entity}"
        if doc is None:
            return slip_text(ctx, StepKind.message, f"Unverified: the {phrase} is {value}.")
        if re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", doc[2]):
            return slip_text(ctx, StepKind.message, f"Confirmed: the {phrase} is {value}.")
        fixed = extract(rel, doc[2])
        if fixed is None:
            return slip_text(ctx, StepKind.message, f"Unverified: the {phrase} is {value}.")
        return slip_text(ctx, StepKind.message, f"Corrected: the {phrase} is {fixed}.")

    # answerer ---------------------------------------------------------
    def answerer(self, ctx) -> str:
        text = ctx.task_text
        findings = dict(re.findall(r"^(\d+)\. (.*)$", text.split("Findings:\n", 1)[-1], re.M))
        which = re.search(r"answer with #(\d+)", text)
        chosen = findings.get(which.group(1)) if which else None
        found = _FINDING.search(chosen or "")
        value = found.group(2) if found else "unknown"
        return slip_text(ctx, StepKind.final_answer, f"Answer: {value}")


_Q = [
    (re.compile(r"Which company was founded by the mayor of (\w+)\?"),
     lambda m: [f"searcher: find the mayor of {m[1]}", "searcher: find the company founded by #1", "answerer: answer with #2"]),
    (re.compile(r"How many people work at the company founded by the mayor of (\w+)\?"),
     lambda m: [f"searcher: find the mayor of {m[1]}", "searcher: find the company founded by #1",
                "searcher: find the number of employees of #2", "answerer: answer with #3"]),
    (re.compile(r"In which town was the mayor of (\w+) born\?"),
     lambda m: [f"searcher: find the mayor of {m[1]}", "searcher: find the birthplace of #1", "answerer: answer with #2"]),
    (re.compile(r"How many more residents does (\w+) have than (\w+)\?"),
     lambda m: [f"searcher: find the population of {m[1]}", f"searcher: find the population of {m[2]}",
                "calculator: compute #1 - #2", "answerer: answer with #3"]),
]


def plan_for(question: str) -> list[str]:
    for pattern, make in _Q:
        m = pattern.search(question)
        if m:
            return make(m)
    return ["answerer: answer with #0"]


# ---------------------------------------------------------------- the environment

_PROMPTS = {
    "planner": ("You are the planner of a research team that answers questions about a private document collection. "
                "Team: searcher (searches the collection), reader (reads a document), calculator (arithmetic), "
                "verifier (checks findings against sources), answerer (writes the final answer).\n"
                "First reply with a numbered plan, one line per step, 'N. agent: instruction', where a step may refer "
                "to the finding of step k as #k; instructions for the searcher read 'find the <relation> <entity>' "
                "(relations: mayor of, company founded by, number of employees of, population of, birthplace of, "
                "founding year of); calculator steps read 'compute <expression>'; the last step is "
                "'answerer: answer with #k'.\nThen, each time you are asked, reply with the next delegation only, "
                "'agent: instruction', with every #k replaced by the verified finding of step k."),
    "searcher": ("You are the searcher of a research team. You get an instruction 'find the <relation> <entity>'. "
                 "Search with 'Action: search' and a query line '<entity> <keyword>'. If no result has the entity as "
                 "its title, search again. Then reply 'reader: see Dk (<title>) for the <relation> <entity>.'"),
    "reader": ("You are the reader of a research team. From the instruction and the search results, read the document "
               "the searcher names and reply 'The <relation> <entity> is <value> (source Dk).' or 'Not found: ...'."),
    "calculator": ("You are the calculator of a research team. For 'compute <expression>' call 'Action: calculate' "
                   "with the expression, then reply '<expression> = <result>'."),
    "verifier": ("You are the verifier of a research team. Check the report against the evidence. Reply 'Confirmed: "
                 "the <relation> <entity> is <value>.' if the value appears in the cited source, else 'Corrected: the "
                 "<relation> <entity> is <value from the source>.'; for calculations, 'Confirmed: the result of "
                 "<expression> is <value>.'"),
    "answerer": ("You are the answerer of a research team. Reply with one line 'Answer: <value>' using the finding the "
                 "planner names (a bare number without units, or a name)."),
}


@register
class ResearchTeam(Environment):
    name = "research_team"
    stands_in_for = "multi-hop QA over documents (HotpotQA)"
    modality = "text"
    topology = "multi"
    description = "planner, searcher, reader, calculator, verifier and answerer answer multi-hop questions over a fictional corpus"
    agents = [
        AgentInfo(name="planner", role="orchestrator", description="plans and delegates each step"),
        AgentInfo(name="searcher", role="worker", description="searches the document collection"),
        AgentInfo(name="reader", role="worker", description="reads a document and reports a value"),
        AgentInfo(name="calculator", role="worker", description="evaluates arithmetic"),
        AgentInfo(name="verifier", role="checker", description="checks findings against their sources"),
        AgentInfo(name="answerer", role="worker", description="writes the final answer"),
    ]
    tools = {
        "search": ToolSpec("search", "search the document collection; returns up to 3 documents", "query", search),
        "calculate": ToolSpec("calculate", "evaluate an arithmetic expression", "expression", calculate),
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        rng = random.Random(seed)
        out = []
        kinds = ["company", "employees", "birthplace", "difference"]
        for i in range(n):
            corpus = make_corpus(rng)
            question, plan, answer = _question(rng, kinds[i % len(kinds)], corpus)
            out.append(Task(id=f"research_team-{seed}-{i}", query=question, reference_answer=answer,
                            metadata={"docs": corpus["docs"], "plan": plan, "question_kind": kinds[i % len(kinds)],
                                      "names": {k: corpus[k] for k in ("towns", "people", "predecessors", "companies")}}))
        return out

    def system_prompt(self, agent: str, task: Task) -> str:
        return _PROMPTS[agent]

    def program(self, task: Task, rt: Runtime) -> str | None:
        planner = Conversation().user(f"Question: {task.query}\nWrite the plan.")
        rt.ask("planner", planner.messages, kind=StepKind.plan)
        planner.assistant(rt.steps[-1].content)
        findings: list[str] = []
        for step_no in range(1, 9):
            planner.user(f"Delegate step {step_no}.")
            delegation = rt.ask("planner", planner.messages,
                                kind=lambda text: StepKind.final_answer if _final(text) is not None else StepKind.message)
            planner.assistant(delegation)
            answer = _final(delegation)
            if answer is not None:  # the planner answered by itself
                return answer
            agent, _, instruction = delegation.partition(":")
            agent, instruction = agent.strip().lower(), instruction.strip()
            if agent == "answerer":
                listing = "\n".join(f"{i + 1}. {f}" for i, f in enumerate(findings))
                reply = rt.ask("answerer", Conversation().user(
                    f"Question: {task.query}\nFindings:\n{listing}\nInstruction from the planner: {instruction}").messages,
                    kind=StepKind.final_answer)
                return _final(reply)
            if agent == "searcher":
                result = self._search_hop(rt, instruction)
            elif agent == "calculator":
                result = self._calc_hop(rt, instruction)
            elif agent in ("reader", "verifier"):
                reply = rt.ask(agent, Conversation().user(f"Instruction: {instruction}").messages)
                result = reply if agent == "verifier" else f"Unverified: {reply}"
            else:
                result = f"There is no agent called {agent or '(none)'}; nothing was done."
            findings.append(result)
            planner.user(f"Result of step {step_no}: {result}")
        return None

    def _search_hop(self, rt: Runtime, instruction: str) -> str:
        conv = Conversation().user(instruction)
        results = ""
        for _ in range(4):
            reply = rt.ask("searcher", conv.messages)
            conv.assistant(reply)
            action = parse_action(reply)
            if action is None:
                break
            output = rt.tool("searcher", action.tool, action.argument)
            if docs_in(output):
                results = output
            conv.user(f"Results:\n{output}")
        handoff = conv.messages[-1]["content"] if conv.messages[-1]["role"] == "assistant" else ""
        report = rt.ask("reader", Conversation().user(
            f"Instruction: {instruction}\nFrom the searcher: {handoff}\nSearch results:\n{results or '(none)'}").messages)
        verdict = rt.ask("verifier", Conversation().user(
            f"Instruction: {instruction}\nReport: {report}\nEvidence:\n{results or '(none)'}").messages)
        return verdict

    def _calc_hop(self, rt: Runtime, instruction: str) -> str:
        conv = Conversation().user(instruction)
        reply = rt.ask("calculator", conv.messages)
        conv.assistant(reply)
        output = ""
        action = parse_action(reply)
        if action is not None:
            output = rt.tool("calculator", action.tool, action.argument)
            conv.user(f"Output:\n{output}")
            reply = rt.ask("calculator", conv.messages)
        verdict = rt.ask("verifier", Conversation().user(
            f"Instruction: {instruction}\nReport: {reply}\nEvidence:\n{output}").messages)
        return verdict

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        ok = answer is not None and _same(answer, task.reference_answer or "")
        return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator="research_team.exact",
                       detail=f"expected {task.reference_answer!r}, got {answer!r}")

    def policy(self) -> TeamPolicy:
        return TeamPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        if task is None:
            people = [f"{f} {l}" for f in FIRST[:6] for l in LAST[:4]]
            return [people, [a + b for a in TOWN_A[:6] for b in TOWN_B[:4]], [f"{a} {b}" for a in CO_A[:5] for b in CO_B[:4]]]
        names = task.metadata["names"]
        return [names["people"] + names["predecessors"], names["towns"], names["companies"],
                [d["id"] for d in task.metadata["docs"]]]

    def mutators(self):
        return mistakes.MUTATORS


_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)


def _final(text: str) -> str | None:
    m = _ANSWER.search(text)
    return m.group(1) if m else None


def _same(answer: str, reference: str) -> bool:
    try:
        return abs(float(answer.replace(",", "")) - float(reference)) < 1e-6
    except ValueError:
        return answer.strip().lower() == reference.strip().lower()
