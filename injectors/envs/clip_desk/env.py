"""`clip_desk` (video): questions about a short clip on an Agno `Team`, whose watcher sees the clip's frames as images.

The team is Agno (`agno`, the `frameworks` extra) running unchanged: a `Team`
in coordinate mode (`TeamMode.coordinate`) whose leader and member each have
their own `OpenAILike` model:

- **lead** (the team leader; its own tool: `calculate`) cannot see the clip.
  It plans which frames to have watched, delegates them with Agno's
  `delegate_task_to_member`, checks the notes it gets back, has `calculate`
  do the arithmetic and answers with an `ANSWER:` line;
- **watcher** (a member `Agent`, tool `get_frames`) asks for frames; the tool
  returns an Agno `ToolResult` whose `images` are the frames (PNG bytes in
  `agno.media.Image`). Agno puts them into the watcher's next request as a
  user message with one `image_url` part per frame (`data:image/png;base64,`
  URLs) after the tool's text, and the watcher notes what each image shows.

Every model has its own `base_url` `/agent/<name>/v1` and an `httpx.Client`
on a `MockTransport` served by the run's `ChatProxy` (no socket); the proxy's
upstream is `policy.DeskPolicy`. Agno's telemetry is off.

Steps: one per recorded call (the lead's plan, delegations, calculation and
answer; the watcher's `get_frames` calls and its notes), and a `tool_result`
step, with no call, after each tool call that ran. The frames that entered the
watcher's request are the media of the `get_frames` result and of the notes
written from them (modality `video`: each carries its frame index and time).
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from faultlens.middleware.model.trace import Media, Outcome, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion, tool_call_of
from ..base import Runtime
from ..docs_team.calculator import calculate
from ..framework import BASE_URL, answer_outcome, quiet_loggers, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import StepLog, tool_arguments
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import DELEGATE, DeskPolicy, images_after
from .world import COLOURS, FAMILIES, SHAPES, answer_of, frame_media, frame_png, get_frames_output, make_task

FRAMEWORK = "agno"
LEAD_TOOL_CALLS = 9  # Agno's count of tool calls per run: a seed run's lead makes 2 to 7
WATCHER_TOOL_CALLS = 3

DESCRIPTIONS = {
    "lead": "Leads the desk: plans which frames to watch, delegates them to the watcher, checks the notes, computes "
            "with calculate and answers.",
    "watcher": "Looks at the clip's frames (get_frames returns them as images) and notes the counter and the parcels "
               "of each frame.",
}
INSTRUCTIONS = {
    "lead": ("You are the lead of the loading dock's video desk. You cannot see the clip; the watcher can. First "
             "write a plan ('Plan:' then '- watch: <batches of frames>', '- note: the counter | the parcels', "
             "'- compute: ...', '- answer: ...') and delegate the first batch to the watcher, then each next batch. "
             "Check the notes: the counter only counts up, and a parcel on the belt is in every frame between its "
             "first and its last; ask the watcher to look again at frames that fail the check. Do the arithmetic with "
             "calculate and end with a line 'ANSWER: <value>'."),
    "watcher": ("You are the watcher of the loading dock's video desk. Get the frames you are asked to watch with "
                "get_frames (a range 0-3, a frame 5 or a list 2,6) and note each frame you were shown, one line per "
                "frame: 'frame K: counter N; <colour> <shape> at x=X, ...' or 'frame K: counter N; no parcels'."),
}

NOT_APPLICABLE = {
    "A.1": "each agent has one tool of its own: a watcher's call of another agent's tool is refused by Agno and it calls "
           "get_frames again, and the lead's only other tool is the delegation, after which it calculates anyway",
    "V.3": "tool results come from the clip and the calculator inside the run (no recorded call to replace), and a "
           "tool error is answered by a retry",
    "A.6": "a repeated delegation or look returns the same notes and the lead moves on at its next reply, within "
           "tool_call_limit: a repetition costs a call, never the task",
}
_SHOWN = re.compile(r"^Clip clip_desk-\d+-\d+: frames ([\d, ]+) of \d+", re.M)


@register
class ClipDesk(ToolCallingTeam):
    name = "clip_desk"
    stands_in_for = "video QA on a conveyor clip (Video-MME)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("agno",)
    modality = "video"
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("An Agno Team (coordinate mode): a lead with a calculator delegates to a watcher whose get_frames "
                   "tool returns a clip's frames as images (Agno sends them as image parts): video QA on a loading "
                   "dock's camera clips (the counter display, the parcels, their order).")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = DeskPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [[f"{c} {s}" for c in COLOURS for s in SHAPES]]

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return answer_outcome(answer, task.reference_answer or "", f"{self.name}:answer", _same)

    def injected_response(self, record: CallRecord, text: str) -> Any:
        return completion(record.request, text)

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        os.environ["AGNO_TELEMETRY"] = "false"  # Agno would post usage events
        with self.framework_imports("Agno"):
            from agno.agent import Agent
            from agno.media import Image
            from agno.models.openai.like import OpenAILike
            from agno.team import Team
            from agno.team.mode import TeamMode
            from agno.tools.function import ToolResult
        quiet_loggers("agno", "agno-team")
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        world, clip = task.metadata["world"], str(task.id)

        def get_frames(frames: str) -> Any:
            """Show frames of the clip as images, in order.

            Args:
                frames: a range like 0-3, a frame like 5, or a list like 2,6.
            """
            text, shown = get_frames_output(world, clip, frames)
            images = [Image(content=frame_png(world, f), mime_type="image/png", format="png") for f in shown]
            return ToolResult(content=text, images=images or None)

        def calculator(expression: str) -> str:
            """The value of an arithmetic expression (numbers, parentheses and + - * /).

            Args:
                expression: e.g. (231 - 198) / 3.
            """
            return calculate(expression)

        calculator.__name__ = "calculate"

        def model(agent: str) -> Any:
            return OpenAILike(id=rt.model, api_key="faultlens-sim", base_url=BASE_URL.format(agent=agent), max_retries=0,
                              http_client=endpoint.client())

        watcher = Agent(id="watcher", name="watcher", role=DESCRIPTIONS["watcher"], model=model("watcher"),
                        tools=[get_frames], instructions=rt.system("watcher"), tool_call_limit=WATCHER_TOOL_CALLS,
                        telemetry=False)
        # named as its leader: the Team is the leader agent (its spans carry this name)
        team = Team(id="lead", name="lead", mode=TeamMode.coordinate, model=model("lead"), members=[watcher],
                    tools=[calculator], instructions=rt.system("lead"), tool_call_limit=LEAD_TOOL_CALLS, telemetry=False)
        prompt = f"{task.query}\nThe clip {clip} is with the watcher; only the watcher can see its frames."
        try:
            result = team.run(prompt, session_id=clip)
        except Exception:  # the framework ended the run, or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt, clip)
        return _answer(result)

    def _steps(self, rt: Runtime, clip: str) -> None:
        """One step per recorded call, then the tool's result (and the frames it showed) after a tool call that ran.

        A tool's output is the `role: "tool"` message of the agent's next request, and its frames the image parts of
        the user message Agno puts after it."""
        outputs: dict[str, tuple[str, list[bytes]]] = {}
        for call in rt.session.calls:
            messages = call.request.get("messages") or []
            for i, m in enumerate(messages):
                for tc in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
                    text = next((str(r.get("content")) for r in messages if r.get("role") == "tool"
                                 and r.get("tool_call_id") == tc.get("id")), None)
                    if text is not None:
                        outputs[str(tc.get("id"))] = (text, images_after(messages, i))
        steps = StepLog(rt)
        delegated = False
        shown: list[Media] = []  # the frames the watcher saw last in its current run
        for index, call in enumerate(rt.session.calls):
            tc = tool_call_of(call.response)
            name = ((tc or {}).get("function") or {}).get("name")
            meta: dict[str, Any] = {}
            media: list[Media] = []
            if call.agent == "lead":
                shown = []
                if name == DELEGATE:
                    kind = StepKind.message if delegated else StepKind.plan
                    delegated = True
                    meta = {"delegate": str(tool_arguments(((tc or {}).get("function") or {}).get("arguments")).get("member_id", ""))}
                else:
                    kind = StepKind.tool_call if tc else StepKind.final_answer
            elif tc is not None:
                kind = StepKind.tool_call
            else:
                kind, media = StepKind.message, list(shown)
            step = steps.reply(index, call, kind, meta=meta, media=media)
            output = outputs.get(str((tc or {}).get("id"))) if kind == StepKind.tool_call else None
            if output is not None:
                text, pngs = output
                frames = _frames_listed(text)
                seen = [frame_media(png, clip, f) for png, f in zip(pngs, frames)]
                shown = seen or shown
                steps.result(step, text, media=seen)
        steps.close()


def _frames_listed(text: str) -> list[int]:
    m = _SHOWN.search(text)
    return [int(f) for f in m.group(1).replace(" ", "").split(",") if f] if m else []


def _same(given: str, reference: str) -> bool:
    try:
        return abs(float(given.replace(",", "")) - float(reference)) < 1e-6
    except ValueError:
        return given.strip().lower().removeprefix("the ").rstrip(".") == reference.strip().lower()


def _answer(result: Any) -> str | None:
    """The leader's last reply when it called no tool (Agno's `content` joins every reply's text of the run)."""
    for message in reversed(list(getattr(result, "messages", None) or [])):
        if getattr(message, "role", None) == "assistant":
            return None if getattr(message, "tool_calls", None) else str(message.content or "")
    return None


__all__ = ["ClipDesk"]
