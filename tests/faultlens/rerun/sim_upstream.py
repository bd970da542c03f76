"""A test double of a model provider: an OpenAI-compatible HTTP server whose "model" is a simulated agent.

The model name is the agent's (`--upstream 'openai/{agent}'`). The researcher
misreads the population (2716 for 2761) unless its system message holds the
gateway's lessons block; the writer reports the number its notes give. Every
request is kept (`requests`), so a test sees which calls went live.
"""

from __future__ import annotations

import re

from tests.http_double import JsonDouble

PROGRAM = '''
import os, sys
from openai import OpenAI

root, task = os.environ["FAULTLENS_GATEWAY"], os.environ["FAULTLENS_TASK"]
researcher = OpenAI(base_url=f"{root}/agent/researcher/v1", api_key="unused", max_retries=0)
writer = OpenAI(base_url=f"{root}/agent/writer/v1", api_key="unused", max_retries=0)
NONCE = ""  # a test sets this to make every run ask something new (drift)

found = researcher.chat.completions.create(model="m", messages=[
    {"role": "system", "content": "You are the researcher: look the figure up." + NONCE},
    {"role": "user", "content": task}]).choices[0].message.content
answer = writer.chat.completions.create(model="m", messages=[
    {"role": "system", "content": "You are the writer: state the answer."},
    {"role": "user", "content": f"Task: {task}\\nNotes: {found}"}]).choices[0].message.content
print(answer)
'''
TASK = "How many thousand people live in Rome?"
RIGHT = "2761"
# Other cities: the researcher gets them right (successful runs, for `faultlens adapt`).
POPULATION = {"Rome": RIGHT, "Milan": "1371", "Naples": "909", "Turin": "841", "Palermo": "630"}
# A judge under the re-run contract: the task from the environment, the program's answer on stdin (a script of its own:
# it runs as a subprocess, where this package is not importable).
JUDGE = f"""
import os, sys
POPULATION = {POPULATION!r}
city = next(c for c in POPULATION if c in os.environ["FAULTLENS_TASK"])
sys.exit(0 if POPULATION[city] in sys.stdin.read() else 1)
"""


class SimUpstream(JsonDouble):
    """`varying`: the writer words each reply a little differently (a sampled model's new draw is a new reply).
    `redraw_slips`: the researcher gets a city wrong when asked the same again (a new draw of a recorded call slips)."""

    def __init__(self, status: int = 200, varying: bool = False, redraw_slips: bool = False):
        self.status, self.varying, self.redraw_slips = status, varying, redraw_slips
        super().__init__(_answer)

    @property
    def url(self) -> str:
        return f"{self.root}/v1"


def reply(agent: str, messages: list[dict]) -> str:
    system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
    if agent == "researcher":
        task = str(messages[-1].get("content"))
        city = next((c for c in POPULATION if c in task), "Rome")
        if city == "Rome" and "<faultlens-lessons>" not in system:
            return "Rome: 2716 thousand people."  # the slip
        return f"{city}: {POPULATION[city]} thousand people."
    notes = str(messages[-1].get("content"))
    number = re.findall(r"\d{3,}", notes)
    return f"The city has {number[-1] if number else 'an unknown number of'} thousand people."


def _answer(server: JsonDouble, body: dict, _handler: object) -> tuple[int, dict]:
    server.requests.append(body)
    if server.status != 200:
        return server.status, {"error": {"message": "the model is overloaded", "type": "server_error"}}
    text = reply(body.get("model", ""), body.get("messages") or [])
    asked_before = sum(r.get("messages") == body.get("messages") for r in server.requests[:-1])
    if server.redraw_slips and body.get("model") == "researcher" and asked_before:
        text = re.sub(r"\d+", lambda m: str(int(m.group()) + 100), text)
    if server.varying and body.get("model") == "writer":
        text += f" (draw {len(server.requests)})"
    return 200, {"id": "c", "object": "chat.completion", "created": 0, "model": body.get("model"),
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
