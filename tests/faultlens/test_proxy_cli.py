"""`faultlens proxy`: option errors say what to do; a real process records, replays (curl) and reports on exit."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
from click.testing import CliRunner

from faultlens.cli import cli


def test_option_errors_name_what_is_missing(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["proxy", "--mode", "record", "--recording", str(tmp_path / "r.json")])
    assert result.exit_code == 2 and "--upstream MODEL" in result.output
    result = runner.invoke(cli, ["proxy", "--mode", "replay", "--recording", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "no such file" in result.output
    (tmp_path / "bad.json").write_text("{not a recording")
    result = runner.invoke(cli, ["proxy", "--mode", "replay", "--recording", str(tmp_path / "bad.json")])
    assert result.exit_code == 2 and "not a faultlens recording" in result.output
    (tmp_path / "empty.json").write_text("[]")
    result = runner.invoke(cli, ["proxy", "--mode", "inject", "--recording", str(tmp_path / "empty.json")])
    assert result.exit_code == 2 and "--at T" in result.output
    result = runner.invoke(cli, ["proxy", "--mode", "replay", "--recording", str(tmp_path / "empty.json"), "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "loopback" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            httpx.get(url + "/v1/models", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("proxy did not start")


def test_record_with_litellm_then_replay_in_a_real_process(tmp_path):
    recording = tmp_path / "run.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    body = {"model": "m", "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    outputs = []
    for mode, extra in (("record", ["--upstream", "faultlens-demo/analyst"]), ("replay", [])):
        port = _free_port()
        # faultlens-demo is the offline demo provider; `faultlens proxy` registers nothing itself,
        # so the record step runs it through a tiny launcher that registers it first.
        launcher = "from faultlens.demo import sim_llm; sim_llm.register(); from faultlens.cli import main; main()"
        proc = subprocess.Popen([sys.executable, "-c", launcher, "proxy", "--mode", mode, "--recording", str(recording),
                                 "--port", str(port), *extra], env=env, stderr=subprocess.PIPE, text=True)
        try:
            _wait(f"http://127.0.0.1:{port}", proc)
            outputs.append(httpx.post(f"http://127.0.0.1:{port}/agent/analyst/v1/chat/completions", json=body).content)
        finally:
            proc.send_signal(signal.SIGINT)
            stderr = proc.communicate(timeout=30)[1]
        assert "1 call(s)" in stderr
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["choices"][0]["message"]["content"].startswith("The combined population is")
    assert len(json.loads(recording.read_text())) == 1
