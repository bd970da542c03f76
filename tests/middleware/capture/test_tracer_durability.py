"""What a traced process keeps when it is killed, in each durability mode (docs/performance.md)."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from faultlens.middleware import open_store

# A traced program: run "done" ends normally, run "open" is left mid-way; then the
# program says "ready" and waits to be killed (or exits, with --exit).
PROGRAM = textwrap.dedent(
    """
    import sys, time
    from faultlens.middleware import Tracer

    db, durability, how = sys.argv[1], sys.argv[2], sys.argv[3]
    tracer = Tracer(db=db, durability=durability, schedule_delay_millis=600_000, env_exporters=False)

    @tracer.tool(name="echo")
    def echo(i: int) -> int:
        return i

    with tracer.run(task="done", trace_id="d" * 32) as run:
        for i in range(4):
            echo(i)
        run.record_outcome(success=True)
    # A run that never ends (as in a crash): started, made current, never closed.
    from faultlens.middleware.capture.tracer import _current_run
    _current_run.set(tracer.start_run(task="open", trace_id="0" * 31 + "1"))
    for i in range(3):
        echo(i)
    print("ready", flush=True)
    if how == "exit":
        sys.exit(0)
    time.sleep(600)
    """
)


def _run(tmp_path, durability: str, how: str):
    db = tmp_path / f"{durability}-{how}.db"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM, str(db), durability, how], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        if how == "kill":
            proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    store = open_store(db)
    return code, store.get_trace("d" * 32), store.get_trace("0" * 31 + "1")


@pytest.mark.parametrize("durability", ["batch", "step"])
def test_sigkill_keeps_every_ended_run_and_what_the_mode_promises_of_the_open_one(tmp_path, durability):
    code, done, open_run = _run(tmp_path, durability, "kill")
    assert code == -signal.SIGKILL
    # A run that ended before the kill is whole in both modes (flushed at run end).
    assert [s.tool_arguments for s in done.steps] == [{"i": i} for i in range(4)] and done.outcome.success
    # The open run's header is written when it starts, in both modes.
    assert open_run.task.query == "open" and open_run.outcome is None
    if durability == "step":
        # every step whose span had ended is committed
        assert [s.tool_arguments for s in open_run.steps] == [{"i": i} for i in range(3)]
    else:
        # the steps still queued (here: all of them, the batch delay is 10 minutes) are lost
        assert open_run.steps == []


@pytest.mark.parametrize("durability", ["batch", "step"])
def test_a_normal_exit_loses_nothing_even_from_a_run_left_open(tmp_path, durability):
    code, done, open_run = _run(tmp_path, durability, "exit")
    assert code == 0
    assert [s.tool_arguments for s in done.steps] == [{"i": i} for i in range(4)]
    assert [s.tool_arguments for s in open_run.steps] == [{"i": i} for i in range(3)]
