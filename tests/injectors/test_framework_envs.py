"""Framework environments without their framework: listed apart, and a clear error naming the extra."""

from __future__ import annotations

import sys

import pytest

from faultlens.injectors import envs
from faultlens.injectors.envs.base import RunResult
from faultlens.injectors.envs.framework import InProcessEndpoint, completion
from faultlens.middleware.replay.session import Drift, Recording, Session

FRAMEWORK_ENVS = {"ag2_experts": "autogen", "smol_analyst": "smolagents"}


def test_framework_environments_are_not_bundled_environments():
    bundled, every = set(envs.names()), set(envs.names(include_frameworks=True))
    assert set(FRAMEWORK_ENVS) <= every - bundled
    assert all(envs.get(n).framework is None for n in bundled)
    assert {envs.get(n).framework for n in FRAMEWORK_ENVS} == {"ag2", "smolagents"}


@pytest.mark.parametrize("name", sorted(FRAMEWORK_ENVS))
def test_without_the_framework_a_run_names_the_extra(name, monkeypatch):
    monkeypatch.setitem(sys.modules, FRAMEWORK_ENVS[name], None)  # as if not installed
    env = envs.get(name)
    task = env.tasks(0, 1)[0]  # tasks need no framework
    with pytest.raises(RuntimeError, match=r"faultlens\[frameworks\]"):
        env.run(task, sim={"seed": 0, "noise": 0.0})


def test_identity_step_calls_by_default():
    result = RunResult(trace=None, recording=Recording(), answer=None)  # type: ignore[arg-type]
    assert result.call_of(3) == 3
    assert RunResult(trace=None, recording=Recording(), answer=None, step_calls=[0, None]).call_of(1) is None  # type: ignore[arg-type]


def test_the_endpoint_records_per_agent_and_keeps_drift():
    session = Session()
    endpoint = InProcessEndpoint(session, lambda agent, request: f"hello from {agent}")
    client = endpoint.client()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    reply = client.post("http://faultlens.invalid/agent/coder/v1/chat/completions", json=body).json()
    assert reply["choices"][0]["message"]["content"] == "hello from coder"
    assert session.calls[0].agent == "coder" and reply == session.calls[0].response
    assert completion(body, "x")["usage"]["prompt_tokens"] == 0
    replay = InProcessEndpoint(Session(session.recorded, replay_until=None), lambda agent, request: "unused")
    changed = dict(body, messages=[{"role": "user", "content": "bye"}])
    response = replay.client().post("http://faultlens.invalid/agent/coder/v1/chat/completions", json=changed)
    assert response.status_code == 409 and isinstance(replay.drift, Drift)
    with pytest.raises(Drift):
        replay.reraise()


def test_native_log_written_only_when_asked_and_kept(tmp_path):
    from faultlens.injectors.pipeline import write_native_log

    assert RunResult(trace=None, recording=Recording(), answer=None).native_log is None  # type: ignore[arg-type]
    assert write_native_log(None, "run", '{"a": 1}\n') is None
    assert write_native_log(str(tmp_path), "run", None) is None and not list(tmp_path.iterdir())
    path = write_native_log(str(tmp_path / "logs"), "env-0-seed", '{"a": 1}\n')
    assert path == tmp_path / "logs" / "env-0-seed.jsonl" and path.read_text() == '{"a": 1}\n'
