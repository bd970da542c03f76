"""Record genuine OpenInference span trees from real agent frameworks, offline.

Runs two small teams against a stub chat-completions endpoint on loopback and
writes each run's spans, in the order they ended (as exporters send them), as
one OTLP JSON document under tests/faultlens/server/fixtures/:

* openai-agents: a `Triage` agent hands off to `Weather Specialist`, which
  calls a `get_weather` function tool;
* smolagents: a `CodeAgent` manager calls a managed ToolCallingAgent
  `weather_agent`, which calls `get_weather` and answers.

It needs packages the project does not depend on; run it from a throwaway venv:

    python3 -m venv /tmp/fw && /tmp/fw/bin/pip install openai-agents==0.24.0 \
        openinference-instrumentation-openai-agents smolagents==1.26.0 \
        openinference-instrumentation-smolagents opentelemetry-sdk \
        opentelemetry-exporter-otlp-proto-http
    /tmp/fw/bin/python scripts/capture_framework_spans.py

The tests only read the saved fixtures. The replies are scripted per agent
(each agent gets its own base_url, `/agent/<name>/v1`), so a rerun gives the
same requests; smolagents' span attributes hold timestamps and object
addresses, so its fixture is not byte-stable across reruns.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["OPENAI_API_KEY"] = "sk-offline"

OUT = Path(__file__).resolve().parent.parent / "tests" / "faultlens" / "server" / "fixtures"
QUESTION = "What is the weather in Paris?"


def _call(name: str, arguments: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _text(text: str) -> dict:
    return {"role": "assistant", "content": text}


# The scripted replies, per agent path, in request order.
SCRIPTS: dict[str, list[dict]] = {
    "triage": [_call("transfer_to_weather_specialist", {})],
    "weather_specialist": [_call("get_weather", {"city": "Paris"}), _text("It is sunny in Paris, 21C.")],
    "manager": [
        _text('Thought: The weather agent can find this.\n<code>\nreport = weather_agent(task="What is the weather in Paris?")\nprint(report)\n</code>'),
        _text('Thought: I have the report.\n<code>\nfinal_answer("It is sunny in Paris, 21C.")\n</code>'),
    ],
    "weather_agent": [_call("get_weather", {"city": "Paris"}), _call("final_answer", {"answer": "Sunny in Paris, 21C"})],
}


class Stub(BaseHTTPRequestHandler):
    served: dict[str, int] = {}

    def log_message(self, *args):  # keep the run quiet
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        agent = self.path.split("/agent/", 1)[1].split("/", 1)[0]
        n = self.served.get(agent, 0)
        self.served[agent] = n + 1
        message = SCRIPTS[agent][n]
        self._send({
            "id": f"chatcmpl-{agent}-{n}", "object": "chat.completion", "created": 1700000000, "model": request.get("model", "stub-model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 20 + n, "completion_tokens": 5 + n, "total_tokens": 25 + 2 * n},
        })


def _otlp_json(spans, service: str) -> dict:
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = encode_spans(spans)
    payload = json_format.MessageToDict(request, use_integers_for_enums=True)
    # One flat list in end order: encode_spans groups by resource and scope, which keeps order within a scope.
    flat = []
    for rs_dict, rs in zip(payload["resourceSpans"], request.resource_spans):
        for ss_dict, ss in zip(rs_dict["scopeSpans"], rs.scope_spans):
            for span_dict, span in zip(ss_dict["spans"], ss.spans):
                span_dict["traceId"] = span.trace_id.hex()
                span_dict["spanId"] = span.span_id.hex()
                if span.parent_span_id:
                    span_dict["parentSpanId"] = span.parent_span_id.hex()
                flat.append(span_dict)
    order = {format(s.context.span_id, "016x"): i for i, s in enumerate(spans)}
    flat.sort(key=lambda d: order[d["spanId"]])
    resource = payload["resourceSpans"][0]["resource"]
    resource["attributes"] = [{"key": "service.name", "value": {"stringValue": service}}]
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": payload["resourceSpans"][0]["scopeSpans"][0].get("scope", {}), "spans": flat}]}]}


def _provider():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def openai_agents_run(base: str) -> dict:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_default_openai_api
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    provider, exporter = _provider()
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    set_default_openai_api("chat_completions")

    def model(path: str) -> OpenAIChatCompletionsModel:
        return OpenAIChatCompletionsModel(model="stub-model", openai_client=AsyncOpenAI(base_url=f"{base}/agent/{path}/v1", api_key="sk-offline"))

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return f"Sunny in {city}, 21C"

    specialist = Agent(name="Weather Specialist", instructions="You answer weather questions with the get_weather tool.", tools=[get_weather], model=model("weather_specialist"))
    triage = Agent(name="Triage", instructions="Hand weather questions to the Weather Specialist.", handoffs=[specialist], model=model("triage"))
    result = asyncio.run(Runner.run(triage, QUESTION))
    print("openai-agents:", result.final_output, file=sys.stderr)
    provider.force_flush()
    return _otlp_json(exporter.get_finished_spans(), "weather-desk")


def smolagents_run(base: str) -> dict:
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, tool

    provider, exporter = _provider()
    SmolagentsInstrumentor().instrument(tracer_provider=provider)

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city.

        Args:
            city: the city's name
        """
        return f"Sunny in {city}, 21C"

    weather_agent = ToolCallingAgent(tools=[get_weather], model=OpenAIServerModel(model_id="stub-model", api_base=f"{base}/agent/weather_agent/v1", api_key="sk-offline"),
                                     name="weather_agent", description="Finds the weather in a city.", max_steps=3)
    manager = CodeAgent(tools=[], model=OpenAIServerModel(model_id="stub-model", api_base=f"{base}/agent/manager/v1", api_key="sk-offline"), managed_agents=[weather_agent], max_steps=3)
    print("smolagents:", manager.run(QUESTION), file=sys.stderr)
    provider.force_flush()
    return _otlp_json(exporter.get_finished_spans(), "weather-desk")


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    OUT.mkdir(parents=True, exist_ok=True)
    which = sys.argv[1:] or ["openai_agents", "smolagents"]
    runs = {"openai_agents": openai_agents_run, "smolagents": smolagents_run}
    for name in which:
        payload = runs[name](base)
        path = OUT / f"{name}_weather.otlp.json"
        path.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"wrote {path} ({len(payload['resourceSpans'][0]['scopeSpans'][0]['spans'])} spans)", file=sys.stderr)
    server.shutdown()


if __name__ == "__main__":
    main()
