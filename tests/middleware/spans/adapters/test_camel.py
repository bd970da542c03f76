"""The CAMEL adapter: a model call's LLM span is named by the role CAMEL's system prompt gives its agent."""

from faultlens.middleware.spans.adapters.camel import agent_name
from faultlens.middleware.spans.mapping import agent_of, span_to_step
from tests.middleware.spans.test_mapping import oi, sid

ASSISTANT = ("===== RULES OF ASSISTANT =====\nNever forget you are a solver and I am a instructor. Never flip roles! "
             "Never instruct me!\nHere is the task: Find the change. Never forget our task!")
USER = ("===== RULES OF USER =====\nNever forget you are a instructor and I am a solver. Never flip roles! You will "
        "always instruct me.")


def _llm(n: int, system: str, role: str = "system", **more):
    return oi(sid(n), "ChatCompletion", "LLM", **{"llm.input_messages.0.message.role": role,
                                                  "llm.input_messages.0.message.content": system, **more})


def test_a_role_players_model_call_is_named_by_its_own_role_not_the_other():
    assert agent_of(_llm(1, ASSISTANT)) == "solver"
    assert agent_of(_llm(2, USER)) == "instructor"
    assert agent_of(_llm(3, "Never forget you are an AI Python programmer and I am a stock trader.")) == "AI_Python_programmer"


def test_camels_helper_agents_are_named_by_their_fixed_system_messages():
    assert agent_of(_llm(1, "You can make a task more specific.")) == "task_specifier"
    assert agent_of(_llm(2, "You are a helpful task planner.")) == "task_planner"


def test_other_model_calls_and_other_spans_name_no_agent():
    assert agent_name(_llm(1, "You are a helpful assistant.")) is None
    assert agent_name(_llm(2, ASSISTANT, role="user")) is None  # only the system message names the role
    tool = oi(sid(3), "lookup", "TOOL", **{"tool.name": "lookup", "llm.input_messages.0.message.role": "system",
                                           "llm.input_messages.0.message.content": ASSISTANT})
    assert agent_of(tool) is None  # asked of model calls only


def test_the_named_model_call_is_a_step_of_that_agent():
    step = span_to_step(_llm(1, ASSISTANT, **{"llm.output_messages.0.message.role": "assistant",
                                              "llm.output_messages.0.message.content": "Solution: 7\nNext request."}))
    assert step.agent == "solver" and step.content == "Solution: 7\nNext request."
