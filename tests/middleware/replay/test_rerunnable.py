"""`LitellmRerunner`: a user's litellm program recorded, then re-run with one step regenerated."""

from __future__ import annotations

import json
import re

import litellm
import pytest
from litellm import CustomLLM
from litellm.utils import custom_llm_setup

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Outcome
from faultlens.middleware.replay.rerunners import NotRerunnable, rerunner_for
from faultlens.middleware.replay.rerunnable import LitellmRerunner


class Adder(CustomLLM):
    """A test double model: 'add' prompts get the sum, except at temperature 0 it drops the last number."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, float]] = []
        self.keys: list[str | None] = []

    def completion(self, model, messages, *args, **kwargs):
        system, user = messages[0]["content"], messages[-1]["content"]
        temperature = float((kwargs.get("optional_params") or {}).get("temperature", 0) or 0)
        agent = re.match(r"You are the (\w+)", system).group(1)
        self.calls.append((agent, temperature))
        self.keys.append(kwargs.get("api_key"))
        numbers = [int(n) for n in re.findall(r"\d+", user)]
        if agent == "reader":
            text = " ".join(str(n) for n in numbers)
        elif agent == "adder":
            text = str(sum(numbers if temperature > 0 else numbers[:-1]))
        else:
            text = f"Answer: {numbers[-1]}"
        return litellm.ModelResponse(model=model, choices=[{"message": {"role": "assistant", "content": text}}])


@pytest.fixture
def model():
    double = Adder()
    before = litellm.custom_provider_map
    litellm.custom_provider_map = [*(before or []), {"provider": "adder-double", "custom_handler": double}]
    custom_llm_setup()
    yield double
    litellm.custom_provider_map = before
    custom_llm_setup()


def right(task: str, answer: str) -> bool:
    return answer == "Answer: " + str(sum(int(n) for n in re.findall(r"\d+", task)))


def make_desk(register: bool = False, **call: object) -> LitellmRerunner:
    desk = LitellmRerunner("adding-desk", judge=right, register=register)

    @desk.tool(agent="reader")
    def double_check(numbers: str) -> str:
        return numbers.strip()

    def ask(agent: str, text: str) -> str:
        reply = desk.completion(agent=agent, model="adder-double/x", temperature=0, **call,
                                messages=[{"role": "system", "content": f"You are the {agent}."}, {"role": "user", "content": text}])
        return reply.choices[0].message.content

    @desk.agent
    def run(task: str) -> str:
        numbers = double_check(ask("reader", task))
        return ask("writer", ask("adder", numbers))

    return desk


TASK = "Add 2, 3 and 4."


def test_record_makes_one_step_per_call_and_keeps_the_recording(model):
    trace = make_desk().record(TASK)
    assert [(s.agent, s.kind.value, s.content) for s in trace.steps] == [
        ("reader", "llm_call", "2 3 4"), ("reader", "tool_result", "2 3 4"), ("adder", "llm_call", "5"),
        ("writer", "final_answer", "Answer: 5")]
    assert trace.outcome.success is False and trace.source.benchmark == "adding-desk"
    assert len(trace.metadata["recording"]) == 4 and trace.metadata["recording"][2]["response"] == {"content": "5"}


def test_a_rerun_replays_the_prefix_exactly_and_regenerates_one_step(model):
    desk = make_desk()
    trace = desk.record(TASK)
    model.calls.clear()
    trial = desk.rerun(trace, 2)
    # steps 0-1 were served from the recording: the model saw only the adder (re-sampled) and the writer
    assert model.calls == [("adder", 1.0), ("writer", 0.0)]
    assert trial.success and trial.changed and trial.regenerated == "9" and trial.live_calls == 2


def test_unchanged_calls_after_the_step_keep_their_recorded_answers(model):
    desk = make_desk()
    trace = desk.record(TASK)
    model.calls.clear()
    trial = desk.rerun(trace, 0)  # the reader re-sampled says the same: nothing downstream is asked again
    assert model.calls == [("reader", 1.0)] and not trial.changed and not trial.success and trial.live_calls == 1


def test_a_replacement_takes_the_place_of_the_step(model):
    desk = make_desk()
    trace = desk.record(TASK)
    model.calls.clear()
    trial = desk.rerun(trace, 2, "9")
    assert trial.success and trial.regenerated == "9" and model.calls == [("writer", 0.0)]
    assert not desk.rerun(trace, 2, "8").success


def test_a_program_that_asks_something_else_is_not_rerunnable(model):
    desk = make_desk()
    trace = desk.record(TASK)
    trace.metadata["recording"][0]["request"]["messages"][1]["content"] = "Add 1 and 1."
    with pytest.raises(NotRerunnable, match="not deterministic"):
        desk.rerun(trace, 2)


def test_traces_without_a_usable_recording(model):
    desk = make_desk()
    trace = desk.record(TASK)
    bare = trace.model_copy(update={"metadata": {}})
    assert desk.can_rerun(trace) and not desk.can_rerun(bare)
    with pytest.raises(NotRerunnable, match="recording"):
        desk.rerun(bare, 1)
    short = trace.model_copy(update={"steps": trace.steps[:3]})
    with pytest.raises(NotRerunnable, match="4 recorded calls for 3 steps"):
        desk.rerun(short, 1)


def test_registered_rerunner_is_found_for_its_traces(model):
    desk = make_desk(register=True)
    assert rerunner_for(desk.record(TASK)) is desk


def test_a_run_that_raises_is_a_failed_run_and_a_judge_may_return_an_outcome(model):
    desk = LitellmRerunner("raising", judge=lambda task, answer: Outcome(success=True, score=0.5), register=False,
                           run=lambda task: 1 / 0)
    trace = desk.record("anything")
    assert not trace.outcome.success and "ZeroDivisionError" in trace.outcome.detail
    desk.run = lambda task: "fine"
    assert desk.record("anything").outcome.score == 0.5
    desk.judge = lambda task, answer: "yes"
    with pytest.raises(FaultlensError, match="expected a bool or an Outcome"):
        desk.record("anything")


def test_outside_a_recorded_run_the_calls_are_plain(model):
    desk = make_desk()
    assert desk.run(TASK) == "Answer: 5" and len(model.calls) == 3


def test_secrets_reach_the_model_but_not_the_recording(model):
    key = "sk-test-0123456789abcdefghijklmn"
    desk = make_desk(api_key=key)
    trace = desk.record(TASK)
    assert model.keys == [key] * 3  # every live call got the key
    assert key not in json.dumps(trace.metadata["recording"]) and trace.metadata["recording"][0]["request"]["api_key"] == "[REDACTED]"
    model.keys.clear()
    assert desk.rerun(trace, 2).success and model.keys == [key] * 2  # the re-sampled call and the writer's, keys and all
