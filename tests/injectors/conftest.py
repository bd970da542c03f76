import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ENVS = ["research_team", "table_qa"]
SIM = {"seed": 11, "noise": 0.2, "tendencies": {}}


@pytest.fixture(scope="session")
def seed_runs():
    """Successful seed runs (simulated agents) per environment: [(task, RunResult)]."""
    from faultlens.injectors import envs

    out = {}
    for name in ENVS:
        env = envs.get(name)
        runs = []
        for task in env.tasks(5, 8):
            result = env.run(task, sim=SIM, trace_id=f"{task.id}-seed")
            runs.append((task, result))
        out[name] = runs
    return out
