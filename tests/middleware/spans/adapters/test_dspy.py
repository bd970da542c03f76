"""The DSPy adapter: a program's own `<Class>.forward` span names the agent; DSPy's own modules' spans do not."""

import json

from faultlens.middleware.spans.adapters.dspy import agent_name
from faultlens.middleware.spans.mapping import agent_of, span_to_step
from tests.middleware.spans.test_mapping import oi, sid


def test_a_programs_module_span_names_the_agent_in_snake_case():
    assert agent_of(oi(sid(1), "Solver.forward", "CHAIN")) == "solver"
    assert agent_of(oi(sid(2), "MeetingPlanner.forward", "CHAIN")) == "meeting_planner"
    assert agent_of(oi(sid(3), "QA2Bot.aforward", "CHAIN")) == "qa2_bot"


def test_dspys_own_modules_predictors_and_adapters_name_no_agent():
    for name in ("ReAct.forward", "ChainOfThought.forward", "Predict.forward", "Predict(StringSignature).forward",
                 "ChatAdapter.__call__", "Solver.__call__", "solver.forward"):
        assert agent_name(oi(sid(1), name, "CHAIN")) is None, name


def test_a_tools_json_string_output_is_read_as_its_text():
    step = span_to_step(oi(sid(1), "calendar.__call__", "TOOL", **{"input.value": json.dumps({"kwargs": {"person": "Ana"}}),
                                                                    "output.value": json.dumps("Ana's calendar:\nMonday: 09:00-10:00 Sync"),
                                                                    "output.mime_type": "application/json"}), agent="solver")
    assert step.tool_result == "Ana's calendar:\nMonday: 09:00-10:00 Sync" and step.tool_arguments == {"person": "Ana"}
