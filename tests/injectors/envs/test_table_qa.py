"""table_qa: varied openings (the plan is not always the first step), the code tool, the check that catches bad filters."""

from __future__ import annotations

import os
from collections import Counter

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.table_qa.env import EXPLORES, explorations, plan_sql, run_python  # noqa: E402
from faultlens.injectors.generators import Generated  # noqa: E402
from faultlens.injectors.pipeline import inject_one  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

from .conftest import seed_runs  # noqa: E402

ENV = "table_qa"
SIM = {"seed": 1, "noise": 0.0, "tendencies": {}}


def test_openings_vary_so_the_plan_moves():
    runs = seed_runs(ENV, SIM, task_seed=2, n=10)
    plan_at = [next(s.index for s in r.trace.steps if s.kind == StepKind.plan) for _, r in runs]
    assert all(r.trace.outcome.success for _, r in runs)
    assert len(set(plan_at)) >= 3, plan_at
    # the most common plan position holds at most half of the runs
    assert Counter(plan_at).most_common(1)[0][1] <= len(plan_at) // 2, plan_at
    # every step before the plan is a look at the data, and the looks differ between runs
    looks = {s.content for _, r in runs for s in r.trace.steps if s.kind == StepKind.tool_call and "# look" in s.content}
    assert len(looks) >= 3


def test_explorations_are_a_function_of_seed_and_task():
    assert explorations(3, "Question: q") == explorations(3, "Question: q")
    seen = {len(explorations(k, "Question: q")) for k in range(40)}
    assert seen == {0, 1, 2, 3, 4}
    assert all(len(set(explorations(k, "Question: q"))) == len(explorations(k, "Question: q")) for k in range(40))
    assert all(code.startswith("# look") for _, code in EXPLORES)


def test_every_look_runs_and_prints_something():
    task = envs.get(ENV).tasks(0, 1)[0]
    for _, code in EXPLORES:
        out = run_python(code, task)
        assert out and "Traceback" not in out, out


def test_a_bad_plan_is_carried_into_a_wrong_answer_and_a_zero_row_filter_is_caught():
    env = envs.get(ENV)
    task, seed = seed_runs(ENV, SIM, task_seed=2, n=10)[0]
    t = next(s.index for s in seed.trace.steps if s.kind == StepKind.plan)
    plan = seed.trace.steps[t].content
    wrong = plan.replace("- compute sum of units", "- compute sum of price").replace("- compute avg of price", "- compute avg of units")
    if wrong == plan:  # a count or argmax question: flip its comparison instead
        wrong = plan.replace(" > ", " < ").replace("take the largest", "take the smallest")
    assert wrong != plan and plan_sql(wrong) != plan_sql(plan)
    kept = inject_one(env, seed.trace, seed.recording, t, "R.4", Generated(wrong, "wrong computation"), model=None, sim=SIM,
                      trace_id="carried")
    assert kept.status == "kept" and kept.trace.gold.step == t
    # a first query whose filter matches no row (a misspelt value) is caught by the row-count check and rewritten
    code_t, task2, seed2 = next((s.index, tk, r) for tk, r in seed_runs(ENV, SIM, task_seed=2, n=10)
                                for s in r.trace.steps if s.kind == StepKind.tool_call and "# look" not in s.content
                                and "# check" not in s.content and "= '" in s.content)
    content = seed2.trace.steps[code_t].content
    misspelt = content.replace("= '", "= 'x", 1)
    caught = inject_one(env, seed2.trace, seed2.recording, code_t, "R.1", Generated(misspelt, "misspelt value"), model=None,
                        sim=SIM, trace_id="caught")
    assert caught.status == "succeeded", caught.reason
