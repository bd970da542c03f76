"""Record genuine OpenInference span trees from real agent frameworks, offline.

Runs small teams against a stub chat-completions endpoint on loopback and
writes each run's spans, in the order they ended (as exporters send them), as
one OTLP JSON document under tests/faultlens/server/fixtures/:

* openai_agents: a `Triage` agent hands off to `Weather Specialist`, which
  calls a `get_weather` function tool;
* smolagents: a `CodeAgent` manager calls a managed ToolCallingAgent
  `weather_agent`, which calls `get_weather` and answers;
* ag2: executor, planner and coder in a GroupChat with `auto` speaker
  selection; the executor runs the coder's Python;
* autogen_agentchat: a Magentic-One team (orchestrator, a `researcher` with a
  `lookup_population` tool, a `writer`).

It needs packages the project does not depend on; run it from throwaway
venvs (AG2 0.14 and AutoGen pin different openai versions, so one each):

    python3 -m venv /tmp/fw && /tmp/fw/bin/pip install openai-agents==0.24.0 \
        openinference-instrumentation-openai-agents smolagents==1.26.0 \
        openinference-instrumentation-smolagents opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    /tmp/fw/bin/python scripts/capture_framework_spans.py openai_agents smolagents
    python3 -m venv /tmp/ag2 && /tmp/ag2/bin/pip install "ag2[openai]==0.14.0" openinference-instrumentation-ag2 \
        opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    /tmp/ag2/bin/python scripts/capture_framework_spans.py ag2
    python3 -m venv /tmp/ac && /tmp/ac/bin/pip install autogen-agentchat==0.7.5 "autogen-ext[openai]==0.7.5" \
        openinference-instrumentation-autogen-agentchat opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    /tmp/ac/bin/python scripts/capture_framework_spans.py autogen_agentchat

The tests only read the saved fixtures. The replies are scripted per agent
(each agent gets its own base_url, `/agent/<name>/v1`), so a rerun sends the
same requests; smolagents' and AutoGen's span attributes hold timestamps,
object addresses and UUIDs, so those fixtures are not byte-stable across reruns.
Versions recorded with: openai-agents 0.24.0 + openinference-instrumentation-openai-agents 2.6.0,
smolagents 1.26.0 + openinference-instrumentation-smolagents 0.1.43, ag2 0.14.0 +
openinference-instrumentation-ag2 0.1.12, autogen-agentchat 0.7.5 +
openinference-instrumentation-autogen-agentchat 0.1.22.
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
TEAMS = {"openai_agents": "weather", "smolagents": "weather", "ag2": "math", "autogen_agentchat": "facts"}


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
    # AG2: the chat manager's requests are speaker selections.
    "chat_manager": [_text("planner"), _text("coder"), _text("executor"), _text("coder")],
    "planner": [_text("Plan: the coder prints 2 + 3 with Python, the executor runs it.")],
    "coder": [_text("```python\nprint(2 + 3)\n```"), _text("The answer is 5. TERMINATE")],
    # AutoGen AgentChat (Magentic-One): the orchestrator's replies are chosen by prompt (see _orchestrator).
    "researcher": [_call("lookup_population", {"city": "Paris"})],
    "writer": [_text("About 2.1 million people live in Paris.")],
}


def _ledger(satisfied: bool, speaker: str, instruction: str) -> dict:
    def field(answer):
        return {"reason": "scripted", "answer": answer}
    return _text(json.dumps({
        "is_request_satisfied": field(satisfied), "is_in_loop": field(False), "is_progress_being_made": field(True),
        "next_speaker": field(speaker), "instruction_or_question": field(instruction),
    }))


def _orchestrator(request: dict, ledgers: int) -> dict:
    """Magentic-One's orchestrator: facts, plan, a progress ledger before each turn, the final answer."""
    last = request["messages"][-1]["content"]
    text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
    if "pure JSON" in text:
        return [_ledger(False, "researcher", "Look up the population of Paris."),
                _ledger(False, "writer", "Write the answer from the population found."),
                _ledger(True, "writer", "Done.")][min(ledgers, 2)]
    if "pre-survey" in text:
        return _text("1. GIVEN OR VERIFIED FACTS\n- The city is Paris.\n2. FACTS TO LOOK UP\n- Its population.\n3. FACTS TO DERIVE\n- None.\n4. EDUCATED GUESSES\n- About 2 million.")
    if "plan" in text and "final answer" not in text:
        return _text("- researcher: look up the population of Paris\n- writer: state the answer")
    return _text("About 2.1 million people live in Paris.")


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
        if agent == "orchestrator":
            last = str(request["messages"][-1]["content"])
            message = _orchestrator(request, self.served.get("ledger", 0))
            if "pure JSON" in last:
                self.served["ledger"] = self.served.get("ledger", 0) + 1
        else:
            message = SCRIPTS[agent][min(n, len(SCRIPTS[agent]) - 1)]
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


def ag2_run(base: str) -> dict:
    import tempfile

    from autogen import AssistantAgent, GroupChat, GroupChatManager, LLMConfig, UserProxyAgent
    from autogen.coding import LocalCommandLineCodeExecutor
    from openinference.instrumentation.ag2 import AG2Instrumentor

    provider, exporter = _provider()
    AG2Instrumentor().instrument(tracer_provider=provider)

    def config(path: str) -> LLMConfig:
        return LLMConfig({"model": "stub-model", "api_key": "sk-offline", "base_url": f"{base}/agent/{path}/v1", "api_type": "openai"})

    planner = AssistantAgent("planner", system_message="You plan how the team answers.", llm_config=config("planner"), description="Plans the work.")
    coder = AssistantAgent("coder", system_message="You write Python code in a code block, then say TERMINATE.", llm_config=config("coder"), description="Writes Python code.")
    with tempfile.TemporaryDirectory() as work:
        executor = UserProxyAgent("executor", human_input_mode="NEVER", code_execution_config={"executor": LocalCommandLineCodeExecutor(work_dir=work)},
                                  description="Runs the code it is given.", default_auto_reply="")
        chat = GroupChat(agents=[executor, planner, coder], messages=[], max_round=6, speaker_selection_method="auto")
        manager = GroupChatManager(chat, llm_config=config("chat_manager"), is_termination_msg=lambda m: "TERMINATE" in str(m.get("content") or ""))
        executor.initiate_chat(manager, message="What is 2 + 3? Compute it with Python.")
    provider.force_flush()
    return _otlp_json(exporter.get_finished_spans(), "math-desk")


def autogen_run(base: str) -> dict:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.teams import MagenticOneGroupChat
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    provider, exporter = _provider()
    AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
    info = {"vision": False, "function_calling": True, "json_output": False, "structured_output": False, "family": "unknown"}

    def client(path: str) -> OpenAIChatCompletionClient:
        return OpenAIChatCompletionClient(model="stub-model", api_key="sk-offline", base_url=f"{base}/agent/{path}/v1", model_info=info)

    async def lookup_population(city: str) -> str:
        """The number of people living in a city."""
        return f"{city} has 2.1 million inhabitants."

    researcher = AssistantAgent("researcher", model_client=client("researcher"), tools=[lookup_population], description="Looks facts up.", system_message="You look facts up with your tools.")
    writer = AssistantAgent("writer", model_client=client("writer"), description="Writes the answer.", system_message="You write the final answer.")
    team = MagenticOneGroupChat([researcher, writer], model_client=client("orchestrator"), max_turns=6)
    result = asyncio.run(team.run(task="How many people live in Paris?"))
    print("autogen:", result.messages[-1].content if result.messages else None, file=sys.stderr)
    provider.force_flush()
    return _otlp_json(exporter.get_finished_spans(), "facts-desk")


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    OUT.mkdir(parents=True, exist_ok=True)
    which = sys.argv[1:] or ["openai_agents", "smolagents"]
    runs = {"openai_agents": openai_agents_run, "smolagents": smolagents_run, "ag2": ag2_run, "autogen_agentchat": autogen_run}
    for name in which:
        payload = runs[name](base)
        path = OUT / f"{name}_{TEAMS[name]}.otlp.json"
        path.write_text(json.dumps(payload, indent=1) + "\n")
        print(f"wrote {path} ({len(payload['resourceSpans'][0]['scopeSpans'][0]['spans'])} spans)", file=sys.stderr)
    server.shutdown()


if __name__ == "__main__":
    main()
