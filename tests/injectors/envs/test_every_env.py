"""What every registered environment guarantees, checked with the shared helpers of `conftest.py`.

Per environment: seed runs succeed under simulated agents and replay exactly;
an injected error of each applicable mode fails the task (kept, labelled) or
is filtered (the run still succeeds); modes it declares not applicable are
never offered, each with a reason; images and frames are step media that
`faultlens traces show` renders.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.applicability import CODES  # noqa: E402
from faultlens.middleware.replay.session import Session  # noqa: E402

from .conftest import seed_runs  # noqa: E402

SIM = {"seed": 9, "noise": 0.2, "tendencies": {}}
ALL = envs.names()
# Modes the template generator reaches in each environment's first three seeds here (the seeds are fixed, so
# this is exact; a mode missing means a rule or the environment's steps changed).
MUST_TRY = {
    "chart_qa": {"P.1", "P.2", "P.3", "R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5",
                 "V.1", "V.3", "C.1", "C.2", "C.3"},
    "code_team": {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5", "V.1", "V.2", "V.3",
                  "C.1", "C.2"},
    "math_react": {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5", "A.6", "V.1", "V.2",
                   "V.3"},
    "research_desk": {"R.3", "A.2", "A.4", "A.6", "V.3", "C.2"},
    "research_team": {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5", "A.6", "V.1",
                      "V.2", "V.3", "C.1", "C.2", "C.3"},
    "table_qa": {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "A.2", "A.4", "A.5", "V.1", "V.3"},
    "video_qa": {"P.1", "P.2", "P.3", "R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "A.2", "A.3", "A.4", "A.5", "A.6", "V.1"},
    "web_shop": {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5", "V.1", "V.2", "V.3"},
}


def test_every_environment_is_covered_here():
    assert set(ALL) == set(MUST_TRY)


@pytest.mark.parametrize("name", ALL)
def test_seed_runs_succeed_and_replay_exactly(name):
    env = envs.get(name)
    runs = seed_runs(name, SIM, task_seed=3, n=3)
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.id, trace.outcome.detail)
        assert trace.source.benchmark == name and trace.source.modality == env.modality
        again = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_each_applicable_mode_fails_the_task_or_is_filtered(name, every_mode):
    tried, kept = every_mode(name, seed_runs(name, SIM, task_seed=3, n=3), SIM)
    assert MUST_TRY[name] <= tried, sorted(MUST_TRY[name] - tried)
    assert kept, "no injected error made the task fail"


@pytest.mark.parametrize("name", ALL)
def test_declared_not_applicable_modes_are_real_modes_with_a_reason(name):
    for code, reason in envs.get(name).not_applicable.items():
        assert code in CODES
        assert len(reason.split()) >= 5, (code, reason)


def test_every_environment_names_the_family_it_stands_in_for():
    """The datasheet's "stands in for" column: a task family and the public benchmark in parentheses, each."""
    every = envs.names(include_frameworks=True)
    missing = [n for n in every if not envs.get(n).stands_in_for.endswith(")") or "(" not in envs.get(n).stands_in_for]
    assert not missing, f"set `stands_in_for` on {missing}"
    assert len({envs.get(n).stands_in_for.split(" (")[1] for n in every}) >= 14  # the spread the datasheet claims


@pytest.mark.parametrize("name", [n for n in ALL if envs.get(n).modality in ("image", "video")])
def test_media_are_step_media_and_traces_show_renders_them(name, tmp_path):
    from click.testing import CliRunner

    from faultlens.cli import cli
    from faultlens.middleware.store import open_store

    trace = seed_runs(name, SIM, task_seed=3, n=3)[0][1].trace
    with_media = [s for s in trace.steps if s.media]
    assert with_media and all(m.mime_type == "image/png" and m.data for s in with_media for m in s.media)
    db = tmp_path / "t.db"
    open_store(db).save_trace(trace)
    result = CliRunner().invoke(cli, ["traces", "show", trace.id, "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "image/png" in result.output
