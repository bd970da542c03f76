"""Whole traces from a complete set of spans: the run's task from its root span."""

from faultlens.middleware.spans.traces import traces_from_records
from tests.middleware.spans.test_mapping import oi, sid


def test_task_from_a_root_input_value():
    for value, query in [('{"task": "Do it", "stream": false}', "Do it"), ('{"message": "Hi", "sender": "a"}', "Hi"), ("plain words", "plain words"),
                         ('[{"role": "system", "content": "s"}, {"role": "user", "content": "Q?"}]', "Q?")]:
        (trace,) = traces_from_records([oi(sid(1), "CodeAgent.run", "AGENT", **{"input.value": value})])
        assert trace.task.query == query, value
