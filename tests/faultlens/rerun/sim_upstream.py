"""A test double of a model provider: an OpenAI-compatible HTTP server whose "model" is a simulated agent.

The model name is the agent's (`--upstream 'openai/{agent}'`). The researcher
misreads the population (2716 for 2761) unless its system message holds the
gateway's lessons block; the writer reports the number its notes give. Every
request is kept (`requests`), so a test sees which calls went live.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
# A judge under the re-run contract: the task from the environment, the program's answer on stdin.
JUDGE = """
import os, sys
from tests.faultlens.rerun.sim_upstream import POPULATION
city = next(c for c in POPULATION if c in os.environ["FAULTLENS_TASK"])
sys.exit(0 if POPULATION[city] in sys.stdin.read() else 1)
"""


class SimUpstream(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, status: int = 200):
        self.requests: list[dict] = []
        self.status = status
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


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


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        self.server.requests.append(body)
        if self.server.status != 200:
            payload, status = {"error": {"message": "the model is overloaded", "type": "server_error"}}, self.server.status
        else:
            text = reply(body.get("model", ""), body.get("messages") or [])
            payload, status = {"id": "c", "object": "chat.completion", "created": 0, "model": body.get("model"),
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}, 200
        out = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
