"""What `pip install faultlens` (no extras) must do, checked with every extra's modules made unimportable.

A subprocess blocks the top-level modules the extras bring (as an install
without them would lack them), then traces a run into the embedded store, and
lists, shows, exports (OTLP JSON and JSONL) and imports it again through the
CLI; a command that needs an extra fails with the extra's name, not a traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from faultlens.middleware.errors import EXTRAS

_SCRIPT = textwrap.dedent('''
    import importlib.abc, sys
    BLOCKED = {blocked!r}

    class NoExtras(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, NoExtras())

    from click.testing import CliRunner
    from faultlens.cli import cli
    from faultlens.middleware import Task, Tracer

    db = sys.argv[1]
    tracer = Tracer(db=db)

    @tracer.tool(name="lookup")
    def lookup(city: str) -> dict:
        return {{"error": f"no entry for {{city}}"}}

    @tracer.agent(name="researcher")
    def researcher(question: str) -> str:
        return str(lookup("Munich"))

    with tracer.run(task=Task(query="Population of Munich?", reference_answer="1500")) as run:
        tracer.final_answer(researcher("Population of Munich?"), agent="researcher")
        run.record_outcome(success=False, detail="no figure")
    tracer.shutdown()

    runner = CliRunner()
    def ok(*args):
        result = runner.invoke(cli, [*args])
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.output
    import json
    from faultlens.middleware import Trace, write_jsonl
    assert run.id in ok("traces", "list", "--db", db, "--json")
    assert "researcher" in ok("traces", "show", run.id, "--db", db)
    ok("traces", "export", run.id, "--format", "otlp", "--db", db, "-o", db + ".otlp.json")
    trace = Trace.model_validate(json.loads(ok("traces", "export", run.id, "--db", db)))
    write_jsonl([trace], db + ".jsonl")
    ok("traces", "import", "otlp:" + db + ".otlp.json", "--db", db + ".2")
    ok("traces", "import", "jsonl:" + db + ".jsonl", "--db", db + ".3")
    for copy in (db + ".2", db + ".3"):
        assert run.id in ok("traces", "list", "--db", copy, "--json")

    needs = runner.invoke(cli, ["serve", "--db", db])
    assert needs.exit_code != 0 and "pip install 'faultlens[server]'" in needs.output, needs.output
    assert not any(m.split(".")[0] in BLOCKED for m in sys.modules)
    print("core ok")
''')


def test_the_core_traces_stores_and_moves_traces_without_any_extra(tmp_path):
    # every extra's top-level module (opentelemetry's exporter and protobuf types only: the API and SDK are core)
    blocked = sorted({name if name.startswith("opentelemetry.") else name.split(".")[0] for name in EXTRAS})
    script = _SCRIPT.format(blocked=blocked)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "core.db")], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("core ok")
