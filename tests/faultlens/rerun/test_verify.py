"""`faultlens verify` end to end, offline: a program on the plain OpenAI SDK (no faultlens import), recorded through
the gateway, re-run in a subprocess with one call corrected; and every way a re-run can show nothing.

The model provider is a test double (`sim_upstream.SimUpstream`, an HTTP server); the rest is real: the
gateway over HTTP, litellm, the program's subprocess, the store, the base method (`blend`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.feedback.memory import LessonMemory
from faultlens.gateway_cli import build_gateway_app
from faultlens.middleware.capture.upstream import LiteLLMUpstream
from faultlens.middleware.replay.gateway_calls import call_steps, recording_of, request_key, request_of
from faultlens.middleware.store import open_store
from faultlens.server.run import ServerThread
from .sim_upstream import PROGRAM, RIGHT, TASK, SimUpstream


@pytest.fixture(scope="module")
def sim():
    server = SimUpstream()
    yield server
    server.shutdown()


def write_program(folder, nonce: str = "", crash_on_rerun: bool = False) -> str:
    text = PROGRAM.replace('NONCE = ""', f"NONCE = {nonce!r}")
    if crash_on_rerun:
        text = text.replace("print(answer)", "if 'rerun-' in root: sys.exit('boom: the re-run crashed')\nprint(answer)")
    path = folder / "agents.py"
    path.write_text(text)
    return f"{sys.executable} {path}"


def record_failed_run(tmp_path, sim, command: str, run: str = "r1"):
    """Run the program once through the live gateway (as a user would) and report it failed."""
    db = tmp_path / "runs.db"
    store = open_store(db)
    app, gateway = build_gateway_app(store, LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim"), workers=0)
    with ServerThread(app) as server:
        env = {**os.environ, "FAULTLENS_GATEWAY": f"{server.url}/run/{run}", "FAULTLENS_TASK": TASK}
        done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert RIGHT not in done.stdout  # the researcher slipped
        assert gateway.flush(20)
        posted = httpx.post(f"{server.url}/api/runs/{run}/outcome", json={"success": False, "detail": f"expected {RIGHT}"})
        assert posted.status_code == 200, posted.text
    gateway.close()
    return db, store


def verify(db, command: str, api_base: str, *extra: str):
    args = ["verify", "r1", "--db", str(db), "--rerun", command, "--upstream", "openai/{agent}", "--api-base", api_base, "--json", *extra]
    result = CliRunner().invoke(cli, args, env={"OPENAI_API_KEY": "sk-sim"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{"):])


def test_a_gateway_run_becomes_a_recording_that_compares_without_lessons(tmp_path, sim):
    db, store = record_failed_run(tmp_path, sim, write_program(tmp_path))
    trace = store.get_trace("r1")
    assert call_steps(trace) == [0, 1] and [s.agent for s in trace.steps] == ["researcher", "writer"]
    recording = recording_of(trace)
    assert recording[0].response["choices"][0]["message"]["content"] == "Rome: 2716 thousand people."
    messages = [{"role": "system", "content": "You are the researcher: look the figure up."}, {"role": "user", "content": TASK}]
    shown = [{"role": "system", "content": messages[0]["content"] + "\n\n<faultlens-lessons>\n- a lesson\n</faultlens-lessons>"}, messages[1]]
    assert request_key(messages, {"model": "m"}) == recording[0].request == request_key(shown, {"model": "m", "stream": False})
    # The call as the program asked it, rebuilt from the step: it compares equal, lessons block and all left out.
    for step, call in zip(trace.steps, recording, strict=True):
        rebuilt = request_of(step)
        assert request_key(rebuilt["messages"], {k: v for k, v in rebuilt.items() if k != "messages"}) == call.request
    assert request_of(trace.steps[0])["messages"] == messages


def test_verify_confirms_the_decisive_call_by_rerunning_the_program(tmp_path, sim):
    command = write_program(tmp_path)
    db, store = record_failed_run(tmp_path, sim, command)
    steps_before = len(store.get_trace("r1").steps)
    live_before = len(sim.requests)
    verdict = verify(db, command, sim.url, "--judge", f"grep -q {RIGHT}")
    assert verdict["verified"] is True and verdict["step"] == 0 and verdict["agent"] == "researcher"
    # The researcher's call drawn anew with the lesson (one model call) and the program re-run with that reply in
    # place: it succeeds. The control keeps the recorded slip: the writer's call, drawn anew first, gives its
    # recorded reply, so the run fails as recorded without the program being re-run (one model call, no rerun).
    # The later candidate (the writer's call) drawn anew says what was recorded: it overturns nothing.
    assert [(t["outcome"], t.get("control", False), t.get("reran", True)) for t in verdict["trials"]] == [
        ("success", False, True), ("failure", True, False), ("unchanged", False, False)]
    assert verdict["trials"][1]["as_recorded"] is True
    assert verdict["reruns"] == 1
    # Live: the new draw, the writer's changed call, the control's writer call, the writer's new draw; nothing else.
    assert len(sim.requests) - live_before == 4
    stored = open_store(db)
    assert len(stored.get_trace("r1").steps) == steps_before  # the run itself is untouched
    saved = stored.attributions("r1")[-1]
    assert saved.method == "verify" and saved.details["verified"] and saved.details["trials"] == verdict["trials"]
    fixed = [lesson for lesson in LessonMemory(stored).lessons() if lesson.helped == 1]
    assert len(fixed) == 1 and fixed[0].agent == "researcher" and fixed[0].attribution_id == saved.id


def test_a_control_that_failed_exactly_as_recorded_needs_no_second(tmp_path, sim):
    command = write_program(tmp_path)
    db, _ = record_failed_run(tmp_path, sim, command)
    verdict = verify(db, command, sim.url, "--judge", f"grep -q {RIGHT}", "--controls", "2")
    assert verdict["verified"] is True and verdict["step"] == 0
    # This upstream answers a request the same way every time: the control's writer, drawn anew, gave its recorded
    # reply, so the run failed exactly as recorded, and a second control would draw the same.
    control = verdict["trials"][1]
    assert control["control"] and control["outcome"] == "failure" and control["as_recorded"] is True
    assert [t.get("control", False) for t in verdict["trials"]] == [False, True, False]
    assert verdict["reruns"] == 1  # the control's draws gave the recorded replies: the program was not re-run


def test_a_control_re_runs_the_program_from_the_first_later_call_whose_new_draw_differs(tmp_path):
    sim = SimUpstream(varying=True)  # the writer words each new draw differently (the number stays the notes')
    try:
        command = write_program(tmp_path)
        db, _ = record_failed_run(tmp_path, sim, command)
        live_before = len(sim.requests)
        verdict = verify(db, command, sim.url, "--judge", f"grep -q {RIGHT}", "--controls", "2")
    finally:
        sim.shutdown()
    assert verdict["verified"] is True and verdict["step"] == 0
    controls = [t for t in verdict["trials"] if t.get("control")]
    # Each control's writer call, drawn first, differs from its recording: the program is re-run with that draw in
    # place (no second draw of it), and fails with the researcher's recorded slip.
    assert len(controls) == 2
    assert all(c["outcome"] == "failure" and c["as_recorded"] is False and c["live_calls"] == 1 and "reran" not in c
               for c in controls)
    # The researcher's new draw and the writer's changed call; one writer draw per control; the later candidate's
    # new draw (it differs, so the program is re-run with it): five model calls, none made twice.
    assert verdict["reruns"] == 4 and len(sim.requests) - live_before == 5


def test_the_reference_answer_or_a_posted_outcome_judges_when_no_judge_command_is_given(tmp_path, sim):
    command = write_program(tmp_path)
    db, _ = record_failed_run(tmp_path, sim, command)
    verdict = verify(db, command, sim.url)  # no judge, no reference, no posted outcome: nothing can decide
    assert verdict["verified"] is False and verdict["not_verifiable"] is True and verdict["trials"][0]["outcome"] == "no_judge"
    posting = tmp_path / "posting.py"
    posting.write_text(PROGRAM + f'\nimport httpx\nhttpx.post(os.environ["FAULTLENS_OUTCOME_URL"], json={{"success": "{RIGHT}" in answer}})\n')
    verdict = verify(db, f"{sys.executable} {posting}", sim.url)
    assert verdict["verified"] is True and verdict["step"] == 0


@pytest.mark.parametrize("case", ["drift", "crash", "judge hangs", "upstream fails"])
def test_a_rerun_that_shows_nothing_leaves_the_base_verdict_unverified(tmp_path, sim, case):
    command = write_program(tmp_path)
    if case == "drift":  # a writer whose new draw differs, so the program is re-run (and drifts)
        sim = SimUpstream(varying=True)
    db, store = record_failed_run(tmp_path, sim, command)
    steps = store.get_trace("r1").model_dump_json()
    api_base, extra = sim.url, ["--judge", f"grep -q {RIGHT}"]
    if case == "drift":  # the program now asks call 0 differently; the candidate is call 1, so call 0 must replay
        command = write_program(tmp_path, nonce=" (today)")
        extra += ["--method", "baseline:last-step", "-k", "1"]
    elif case == "crash":
        command = write_program(tmp_path, crash_on_rerun=True)
    elif case == "judge hangs":
        extra = ["--judge", "sleep 30", "--judge-timeout", "1"]
    else:
        failing = SimUpstream(status=500)
        api_base = failing.url
    verdict = verify(db, command, api_base, *extra)
    if case == "upstream fails":
        failing.shutdown()
    if case == "drift":
        sim.shutdown()
    expected = {"drift": "drift", "crash": "crash", "judge hangs": "judge_timeout", "upstream fails": "upstream_error"}[case]
    assert verdict["verified"] is False
    assert verdict["trials"][0]["outcome"] == expected and verdict["trials"][0]["detail"]
    assert verdict["step"] == verdict["base_step"]  # the base's verdict stands
    assert verdict["not_verifiable"] is (case != "crash")
    assert open_store(db).get_trace("r1").model_dump_json() == steps  # nothing stored is lost


def test_the_server_worker_verifies_a_failed_gateway_run_and_the_run_page_shows_the_reruns(tmp_path, sim, monkeypatch):
    """`faultlens gateway --rerun CMD ...` (and `serve`): the worker attributes a failed run by re-running the program."""
    import time

    from faultlens.rerun.cli import rerun_wrapper

    monkeypatch.setenv("OPENAI_API_KEY", "sk-sim")  # the upstream's key, from the server's environment as in production
    command = write_program(tmp_path)
    store = open_store(tmp_path / "runs.db")
    upstream = LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim")
    wrap = rerun_wrapper(command, "openai/{agent}", sim.url, f"grep -q {RIGHT}")
    app, gateway = build_gateway_app(store, upstream, workers=1, verify_with=wrap)
    with ServerThread(app) as server:
        env = {**os.environ, "FAULTLENS_GATEWAY": f"{server.url}/run/live-1", "FAULTLENS_TASK": TASK, "OPENAI_API_KEY": "sk-sim"}
        assert subprocess.run(command, shell=True, env=env, capture_output=True, timeout=120).returncode == 0
        assert gateway.flush(20)
        assert httpx.post(f"{server.url}/api/runs/live-1/outcome", json={"success": False}).status_code == 200
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not store.attributions("live-1"):
            time.sleep(0.2)
        page = httpx.get(f"{server.url}/runs/live-1").text
    gateway.close()
    latest = store.attributions("live-1")[-1]
    assert latest.method == "verify" and latest.details["verified"] and latest.step == 0, (latest.details.get("fallback"), latest.details["trials"])
    assert "verified by re-run" in page and 'id="trials"' in page and "succeeded" in page


def test_the_documented_program_is_recorded_and_verified(tmp_path, sim):
    """docs/verify.md's 30-line program, as written: recorded through the gateway, then verified by `faultlens verify`."""
    from tests.middleware.test_readme import DOCS, section_blocks

    (block,) = section_blocks(DOCS / "verify.md", "verify")
    assert len(block.strip().splitlines()) <= 30
    program = tmp_path / "agents.py"
    program.write_text(block)
    command = f"{sys.executable} {program}"
    db, _ = record_failed_run(tmp_path, sim, command)
    verdict = verify(db, command, sim.url, "--judge", f"grep -q {RIGHT}")
    assert verdict["verified"] is True and verdict["agent"] == "researcher"


def test_a_new_draw_that_gives_the_recorded_reply_ends_the_candidate_without_rerunning_the_program(tmp_path, sim):
    command = write_program(tmp_path)
    db, _ = record_failed_run(tmp_path, sim, command)
    marker = tmp_path / "ran"
    counting = tmp_path / "counting.py"  # the same program, leaving a mark each time it runs
    counting.write_text(f"open({str(marker)!r}, 'a').write('x')\n" + (tmp_path / "agents.py").read_text())
    live_before = len(sim.requests)
    # The writer (the last step) reports what its notes say: drawn anew, it says the same.
    verdict = verify(db, f"{sys.executable} {counting}", sim.url, "--judge", f"grep -q {RIGHT}", "--method", "baseline:last-step", "-k", "1")
    assert verdict["verified"] is False and verdict["step"] == 1 and verdict["reruns"] == 0
    trial = verdict["trials"][0]
    assert trial["outcome"] == "unchanged" and trial["reran"] is False and "not re-run" in trial["detail"]
    assert not marker.exists() and len(sim.requests) - live_before == 1  # one model call, no program run


def test_mode_from_correction_reads_the_verified_verdicts_mode_from_what_the_new_draw_changed(tmp_path, sim):
    command = write_program(tmp_path)
    db, _ = record_failed_run(tmp_path, sim, command)
    base = verify(db, command, sim.url, "--judge", f"grep -q {RIGHT}")
    read = verify(db, command, sim.url, "--judge", f"grep -q {RIGHT}", "--mode-from", "correction")
    assert base["verified"] and read["verified"] and read["step"] == base["step"] == 0
    # The new draw put back a figure no input of the researcher's call held: a number worked out wrong, not blend's mode.
    saved = open_store(db).attributions("r1")
    assert [a.details["mode_from"] for a in saved[-2:]] == ["blend", "correction"]
    assert read["mode"] == "R.3" != base["mode"]
    result = CliRunner().invoke(cli, ["verify", "r1", "--db", str(db), "--rerun", command, "--upstream", "m", "--mode-from", "guess"])
    assert result.exit_code == 2 and "--mode-from" in result.output
