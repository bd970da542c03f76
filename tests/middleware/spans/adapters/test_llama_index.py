"""The LlamaIndex adapter: agents named by the workflow step that runs them; the workflow's event plumbing and the
model call's wrappers are no steps."""

import json

from faultlens.middleware.spans.mapping import agent_of, header_from_record, span_to_step
from tests.middleware.spans.test_mapping import oi, sid

SETUP = "AgentSetup(input=[4 items], current_agent_name='researcher')"
MESSAGES = {"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Searching the flights.",
            "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "Book a trip"}


def test_a_run_agent_step_names_the_agent_of_the_event_it_takes_in():
    step = oi(sid(1), "AgentWorkflow.run_agent_step", "CHAIN", **{"input.value": json.dumps({"ctx": "<Context>", "ev": SETUP})})
    assert agent_of(step) == "researcher"
    assert agent_of(oi(sid(2), "FunctionAgent.run_agent_step", "CHAIN", **{"input.value": SETUP})) == "researcher"
    assert agent_of(oi(sid(3), "AgentWorkflow.setup_agent", "CHAIN", **{"input.value": SETUP})) is None  # only the step that runs it
    assert agent_of(oi(sid(4), "AgentWorkflow.run_agent_step", "CHAIN", **{"input.value": "{}"})) is None


def test_workflow_event_plumbing_is_no_step_and_a_chain_that_reports_text_still_is():
    for output in ("AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: 'assistant'>, additio", "None",
                   "ToolCallResult(tool_name='handoff', tool_kwargs={'to_agent': 'booker'}, tool_id='c1')"):
        assert span_to_step(oi(sid(1), "AgentWorkflow.aggregate_tool_results", "CHAIN", **{"output.value": output,
                                                                                         "output.mime_type": "text/plain"})) is None
    observation = span_to_step(oi(sid(2), "Step 2", "CHAIN", **{"output.value": "Execution logs: 42", "output.mime_type": "text/plain"}))
    assert observation is not None and observation.content == "Execution logs: 42"  # another framework's chain, kept


def test_only_the_model_call_that_records_its_messages_is_a_step():
    assert span_to_step(oi(sid(1), "OpenAILike._prepare_chat_with_tools", "LLM", **{"output.value": '{"messages": []}'})) is None
    assert span_to_step(oi(sid(2), "OpenAILike.achat", "LLM", **{"output.value": '{"message": {"role": "assistant"}}'})) is None
    inner = span_to_step(oi(sid(3), "OpenAILike.achat", "LLM", **MESSAGES), agent="researcher")
    assert inner is not None and inner.content == "Searching the flights." and inner.agent == "researcher"
    other = span_to_step(oi(sid(4), "ChatCompletion", "LLM", **{"output.value": "hello"}))
    assert other is not None  # a model span of another instrumentation, without messages, is still a step


def test_a_root_whose_input_is_the_workflows_state_states_no_task():
    root = oi(sid(1), "AgentWorkflow.run", "CHAIN", **{"input.value": json.dumps({"init_state": {"is_running": False},
                                                                                "start_event": "AgentWorkflowStartEvent()"})})
    assert header_from_record(root, "t" * 32).task.query == ""  # the run's first user message becomes the task
    plain = oi(sid(2), "run", "CHAIN", **{"input.value": "What is 2 + 2?"})
    assert header_from_record(plain, "t" * 32).task.query == "What is 2 + 2?"


def test_a_tool_output_is_read_as_the_text_of_its_blocks():
    output = json.dumps({"blocks": [{"block_type": "text", "text": "held booking BK-1001"}], "tool_name": "book_trip",
                         "raw_input": {"kwargs": {}}, "raw_output": "held booking BK-1001", "is_error": False})
    step = span_to_step(oi(sid(1), "FunctionTool.acall", "TOOL", **{"tool.name": "book_trip", "output.value": output,
                                                                    "output.mime_type": "application/json"}), agent="booker")
    assert step.content == "held booking BK-1001" and step.tool_result == "held booking BK-1001"
    plain = span_to_step(oi(sid(2), "lookup", "TOOL", **{"tool.name": "lookup", "output.value": json.dumps({"blocks": [1]})}))
    assert plain.tool_result == {"blocks": [1]}  # not a ToolOutput: as it was
