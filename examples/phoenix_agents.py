"""Send a Phoenix some agent runs to attribute: real smolagents runs, offline, as their OpenInference spans.

    python examples/phoenix_agents.py http://127.0.0.1:6006 --project agents

Runs the bundled `smol_analyst` team (a smolagents CodeAgent managing a data
agent, on simulated models: no key, no network) on a few tasks, and injects
errors into copies of the successful runs (`faultlens inject`), so some runs
fail. Each run's spans, as `openinference-instrumentation-smolagents` emits
them, go to Phoenix's OTLP/HTTP collector endpoint (URL/v1/traces) in the
project; each run then gets a `correctness` trace annotation from the task's
own check (`incorrect` for the failed runs), as an evaluation would write.
Then `faultlens phoenix sync URL --project agents --failed-if
correctness=incorrect` attributes the failed ones (docs/phoenix.md).

Needs the `frameworks` and `phoenix` extras: pip install 'faultlens[frameworks,phoenix]'.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def send(url: str, document: dict, project: str) -> str:
    """One run's OTLP JSON to Phoenix over OTLP/HTTP (protobuf), in `project`; its trace id (hex)."""
    import httpx
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ParseDict(document, ExportTraceServiceRequest())
    for resource_spans in request.resource_spans:
        # the resource attribute that names the Phoenix project (what phoenix.otel.register(project_name=...) sets)
        attribute = resource_spans.resource.attributes.add()
        attribute.key, attribute.value.string_value = "openinference.project.name", project
    httpx.post(f"{url}/v1/traces", content=request.SerializeToString(), headers={"content-type": "application/x-protobuf"}, timeout=30).raise_for_status()
    return request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()


def wait_for_trace(url: str, project: str, trace_id: str, timeout: float = 30.0) -> None:
    """Phoenix stores spans in the background: a trace can be annotated once it is there."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        # (404 until the project's first span is stored)
        response = httpx.get(f"{url}/v1/projects/{project}/spans", params={"trace_id": trace_id, "limit": 1}, timeout=30)
        if response.status_code == 200 and response.json().get("data"):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"Phoenix at {url} did not store trace {trace_id} within {timeout:g} s")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="Phoenix's base URL, e.g. http://127.0.0.1:6006")
    parser.add_argument("--project", default="agents")
    parser.add_argument("--seeds", type=int, default=2, help="tasks run to success first")
    parser.add_argument("--per-seed", type=int, default=2, help="errors injected per successful run")
    args = parser.parse_args()

    from phoenix.client import Client

    from faultlens.injectors.pipeline import InjectConfig, inject

    url = args.url.rstrip("/")
    with tempfile.TemporaryDirectory() as folder:
        result = inject(InjectConfig(envs=["smol_analyst"], seeds=args.seeds, per_seed=args.per_seed, seed=0, workers=1, otlp_dir=folder))
        failed = {trace.id for trace in result.traces}
        client = Client(base_url=url)
        sent = [(path.stem, send(url, json.loads(path.read_text(encoding="utf-8")), args.project)) for path in sorted(Path(folder).glob("*.json"))]
        for name, trace_id in sent:
            label = "incorrect" if name in failed else "correct"
            wait_for_trace(url, args.project, trace_id)
            client.traces.add_trace_annotation(trace_id=trace_id, annotation_name="correctness", annotator_kind="CODE", label=label,
                                               explanation="the task's own check of the final answer", sync=True)
            print(f"{trace_id}  {name:28}  correctness={label}")


if __name__ == "__main__":
    main()
