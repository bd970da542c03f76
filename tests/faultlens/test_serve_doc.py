"""docs/serve.md's send_run.py runs against a live `faultlens serve` app, and the run is blamed as the doc says."""

import re
import time
from pathlib import Path

import httpx
import pytest

from faultlens.middleware.store import open_store
from faultlens.wiring import build_app
from faultlens.server import ServerThread

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


def send_run_script() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("<!-- section: serve -->") : text.index("<!-- end: serve -->")]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


@pytest.mark.slow
def test_send_run_is_blamed_as_documented(tmp_path, capsys):
    store = open_store(tmp_path / "runs.db")
    with ServerThread(build_app(store)) as server:
        script = send_run_script().replace("http://127.0.0.1:4318", server.url)
        exec(compile(script, str(DOC), "exec"), {})  # noqa: S102 - running our own documentation
        run_id = capsys.readouterr().out.strip()
        response = httpx.post(f"{server.url}/api/runs/{run_id}/outcome", json={"success": False, "detail": "expected 3000 m"})
        assert response.status_code == 200, response.text
        deadline = time.monotonic() + 60
        while (body := httpx.get(f"{server.url}/api/runs/{run_id}/attribution").json())["job"]["state"] != "done":
            assert time.monotonic() < deadline, body
            time.sleep(0.2)
        attribution = body["attributions"][0]
        assert (attribution["agent"], attribution["step"], attribution["mode"]) == ("worker", 1, "A.2")
        lessons = httpx.get(f"{server.url}/api/lessons/for", params={"agent": "worker", "task": "Convert 5 km to metres"}).json()
        assert any(lesson["advice"].startswith("Copy tool arguments exactly") for lesson in lessons)
