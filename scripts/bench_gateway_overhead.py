"""The live gateway's own cost per call: the same OpenAI SDK call made directly to an upstream and through the gateway.

The upstream is a local OpenAI-compatible server (stdlib HTTP, a fixed chat
completion), so what is measured is the gateway, not a model. Through the
gateway, each call is parsed, has the agent's lessons retrieved and added (for
an enabled agent, with lessons in memory), is forwarded through litellm to the
same upstream, and is recorded as a step in a SQLite store (the write is on
the gateway's writer thread: it is not in the call's latency, but it uses the
same CPU). Calls alternate between the two paths, so load on the machine hits
both alike.

    python scripts/bench_gateway_overhead.py                 # 300 calls each way
    python scripts/bench_gateway_overhead.py --calls 1000 --stream

Prints the median and p99 latency of each path and their differences (the overhead).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

COMPLETION = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Rome has 2761 thousand people."},
                           "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}}
CHUNKS = [{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
           "choices": [{"index": 0, "delta": {"role": "assistant", "content": word + " "}, "finish_reason": None}]}
          for word in "Rome has 2761 thousand people.".split()] + [
    {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]


class Upstream(BaseHTTPRequestHandler):
    """A provider's chat completions endpoint that answers at once (JSON, or SSE when asked to stream)."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as two writes; without TCP_NODELAY, Nagle's algorithm and the client's
        # delayed ACK hold the second for ~40 ms on a kept-alive connection, which would be measured as the upstream's time.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if body.get("stream"):
            data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in CHUNKS) + b"data: [DONE]\n\n"
            kind = "text/event-stream"
        else:
            data, kind = json.dumps(COMPLETION).encode(), "application/json"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


@click.command()
@click.option("--calls", default=300, show_default=True, help="Calls per path (after 20 warm-up calls each).")
@click.option("--stream", is_flag=True, help="Streamed calls (the time to the last chunk).")
@click.option("--lessons/--no-lessons", default=True, show_default=True, help="Enable lessons for the calling agent (3 in memory).")
def main(calls: int, stream: bool, lessons: bool) -> None:
    import logging

    import openai

    from faultlens.feedback.gateway_lessons import GatewayLessons
    from faultlens.feedback.memory import LessonMemory
    from faultlens.middleware.capture.live_gateway import Gateway
    from faultlens.server.gateway_routes import create_gateway_app
    from faultlens.middleware.capture.upstream import LiteLLMUpstream
    from faultlens.middleware.model.trace import Lesson
    from faultlens.middleware.store import open_store
    from faultlens.server.run import ServerThread

    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    provider = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    upstream_url = f"http://127.0.0.1:{provider.server_port}/v1"
    folder = Path(tempfile.mkdtemp(prefix="faultlens-bench-gateway-"))
    store = open_store(folder / "runs.db")
    memory = LessonMemory(store)
    for n, situation in enumerate(["questions about how many people live in a city", "population of European capitals",
                                   "figures quoted from a registry"]):
        memory.add(Lesson(agent="researcher", mode="R.3", situation=situation, mistake=f"mistake {n}", advice="copy the figure"))
    gateway = Gateway(LiteLLMUpstream("openai/bench", api_base=upstream_url, api_key="sk-bench"), store,
                      GatewayLessons(memory, ["researcher"] if lessons else []))
    messages = [{"role": "system", "content": "You are the researcher."},
                {"role": "user", "content": "How many people live in Rome? Quote the registry's figure."}]
    with ServerThread(create_gateway_app(gateway)) as server:
        direct = openai.OpenAI(base_url=upstream_url, api_key="sk-bench", max_retries=0)
        through = openai.OpenAI(base_url=f"{server.url}/run/bench/agent/researcher/v1", api_key="unused", max_retries=0)

        def call(client: openai.OpenAI) -> float:
            started = time.perf_counter()
            if stream:
                text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
                    model="bench", messages=messages, stream=True) if c.choices)
            else:
                text = client.chat.completions.create(model="bench", messages=messages).choices[0].message.content
            seconds = time.perf_counter() - started
            assert "2761" in (text or ""), text
            return seconds

        for _ in range(20):
            call(direct), call(through)
        times: dict[str, list[float]] = {"direct": [], "gateway": []}
        for _ in range(calls):
            times["direct"].append(call(direct))
            times["gateway"].append(call(through))
        gateway.flush(60)
        status = gateway.status()
    provider.shutdown()
    gateway.close()
    recorded = len(store.get_trace("bench").steps)
    store.close()

    ms = {k: [v * 1000 for v in vs] for k, vs in times.items()}
    med = {k: statistics.median(v) for k, v in ms.items()}
    p99 = {k: _percentile(v, 0.99) for k, v in ms.items()}
    kind = "streamed" if stream else "non-streamed"
    print(f"{calls} {kind} calls each way, lessons {'on' if lessons else 'off'} ({status['lessons_shown']} calls shown lessons), "
          f"{recorded} steps recorded, {status['dropped']} dropped")
    print(f"direct to the upstream : median {med['direct']:.2f} ms, p99 {p99['direct']:.2f} ms")
    print(f"through the gateway    : median {med['gateway']:.2f} ms, p99 {p99['gateway']:.2f} ms")
    print(f"gateway overhead       : median +{med['gateway'] - med['direct']:.2f} ms, p99 +{p99['gateway'] - p99['direct']:.2f} ms")
    per_call = [g - d for g, d in zip(ms["gateway"], ms["direct"])]
    print(f"paired per call        : median +{statistics.median(per_call):.2f} ms, p99 +{_percentile(per_call, 0.99):.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
