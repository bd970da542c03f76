"""Who&When Pro (2026) importer: one JSON file per failed trace.

Top level: `id`, `framework`, `benchmark`, `modality` (text/image/video),
`task` {query, answer, options?, images?}, `ground_truth` {agent (null for a
single-agent trace), mode (a taxonomy code), reason?, and the step as `step`
(an integer or a hierarchical string such as "1.1") or as `round` + `position`},
optional `agents` and `topology`, and `trajectory`.

The trajectory's entries take one of three shapes, depending on the framework.
Each entry becomes one `Step`, and keeps its native step id (`Step.native_id`),
which is what the gold label and the scorer use:

    chat message    {kind: system|user|assistant|tool, content, tool_calls?, frames?, name?, agent?}
                    native id: the entry's `step` if given, else its 0-based position
    planning/action {step_number, plan? | code?, observation?, observation_images?, error?, ...}
                    native id: `step_number` ("3" or "1.1")
    agent turn      {agent, role?, round, position, output}
                    native id: "ROUND:POSITION"

Images and frames are a path relative to the file, a `data:` URI, or an object
{path | data | uri, mime_type?, frame_index?, timestamp?}. An entry of any other
shape is an error naming the file and the entry, never skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from faultlens.middleware.errors import InputError, from_validation_error
from faultlens.middleware.model import AgentInfo, GoldLabel, Media, Outcome, Source, Step, StepKind, StepRole, Task, Trace
from faultlens.middleware.roles import executor_name
from faultlens.middleware.taxonomy import BY_CODE

from .whowhen import json_files, read_json, subset_of

FORMAT = "whowhenpro"
CHAT_KINDS = {"system", "user", "assistant", "tool"}
MODALITIES = {"text", "image", "video"}


def read_whowhenpro(directory: str | Path) -> Iterator[Trace]:
    """Yield one failed `Trace` with its gold label per Who&When Pro file."""
    root = Path(directory)
    for path in json_files(root, f"whowhenpro:{directory}"):
        yield parse_whowhenpro(read_json(path), path, subset_of(path, root))


def native_step_of(gold: dict, source: str) -> str:
    """The gold step as a native id string ("3", "1.1" or "ROUND:POSITION")."""
    if "step" in gold and gold["step"] is not None:
        step = gold["step"]
        if isinstance(step, bool) or not isinstance(step, (int, str)) or (isinstance(step, str) and not step.strip()):
            raise InputError(source, None, "ground_truth.step", f"expected an integer or a step id such as '1.1', got {step!r}")
        return str(step).strip()
    if "round" in gold and "position" in gold:
        for key in ("round", "position"):
            if isinstance(gold[key], bool) or not isinstance(gold[key], int):
                raise InputError(source, None, f"ground_truth.{key}", f"expected an integer, got {gold[key]!r}")
        return f"{gold['round']}:{gold['position']}"
    raise InputError(source, None, "ground_truth.step", "missing: give `step`, or `round` and `position`")


class _Parser:
    def __init__(self, data: dict, path: Path):
        self.data, self.path, self.source = data, path, str(path)

    def fail(self, record: str | None, field: str | None, message: str) -> InputError:
        return InputError(self.source, record, field, message)

    # -- media ---------------------------------------------------------------

    def media(self, value: Any, record: str | None, field: str, frame_index: int | None = None) -> Media:
        if isinstance(value, str):
            value = {"data": value} if value.startswith("data:") else {"path": value}
        if not isinstance(value, dict):
            raise self.fail(record, field, f"expected an image path, a data: URI or an object, got {type(value).__name__}")
        mime = value.get("mime_type") or value.get("mime")
        frame = value.get("frame_index", frame_index)
        timestamp = value.get("timestamp", value.get("timestamp_s"))
        if value.get("data") is not None:
            data = str(value["data"])
            if data.startswith("data:"):
                header, _, data = data.partition(",")
                if ";base64" not in header:
                    raise self.fail(record, field, "inline media must be base64 (data:MIME;base64,...)")
                mime = mime or header[5:].split(";")[0]
            try:
                raw = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise self.fail(record, field, "inline media is not valid base64") from None
            mime = mime or _sniff(raw)
            if not mime:
                raise self.fail(record, field, "inline media without a MIME type that cannot be recognised; add mime_type")
            return Media(mime_type=mime, data=data, frame_index=frame, timestamp_s=timestamp)
        if value.get("path") is not None:
            location = (self.path.parent / str(value["path"])).resolve()
            if not location.is_file():
                raise self.fail(record, field, f"image file not found: {value['path']} (looked in {location})")
            mime = mime or mimetypes.guess_type(location.name)[0]
            if not mime:
                raise self.fail(record, field, f"cannot tell the MIME type of {value['path']}; add mime_type")
            return Media(mime_type=mime, path=str(location), frame_index=frame, timestamp_s=timestamp)
        uri = value.get("uri") or value.get("url")
        if uri:
            mime = mime or mimetypes.guess_type(str(uri))[0] or "image/*"
            return Media(mime_type=mime, uri=str(uri), frame_index=frame, timestamp_s=timestamp)
        raise self.fail(record, field, "media object needs `path`, `data` or `uri`")

    def media_list(self, entry: dict, key: str, record: str, frames: bool = False) -> list[Media]:
        value = entry.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            value = [value]
        return [self.media(v, record, f"{key}[{i}]", i if frames else None) for i, v in enumerate(value)]

    # -- trajectory entries --------------------------------------------------

    def content_and_parts(self, content: Any, record: str) -> tuple[str, list[Media]]:
        """Plain text, or OpenAI-style content parts (text and image_url)."""
        if content is None:
            return "", []
        if isinstance(content, str):
            return content, []
        if isinstance(content, list):
            texts, media = [], []
            for i, part in enumerate(content):
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, dict) and part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif isinstance(part, dict) and part.get("type") == "image_url":
                    url = part.get("image_url")
                    url = url.get("url") if isinstance(url, dict) else url
                    media.append(self.media({"data": url} if str(url).startswith("data:") else {"uri": url} if "://" in str(url) else {"path": url},
                                            record, f"content[{i}]"))
                else:
                    raise self.fail(record, f"content[{i}]", f"unknown content part {json.dumps(part)[:80]}")
            return "\n".join(texts), media
        return json.dumps(content, ensure_ascii=False), []

    def tool_calls(self, calls: Any, record: str) -> list[dict]:
        if not isinstance(calls, list):
            raise self.fail(record, "tool_calls", f"expected a list, got {type(calls).__name__}")
        out = []
        for i, call in enumerate(calls):
            if not isinstance(call, dict):
                raise self.fail(record, f"tool_calls[{i}]", "expected an object")
            fn = call.get("function") if isinstance(call.get("function"), dict) else call
            name = fn.get("name")
            if not name:
                raise self.fail(record, f"tool_calls[{i}].name", "missing")
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    pass  # keep the model's raw argument text: it may be the error
            out.append({"name": name, "arguments": args})
        return out

    def chat_step(self, entry: dict, i: int, record: str) -> Step:
        kind_name = entry["kind"]
        text, media = self.content_and_parts(entry.get("content"), record)
        media += self.media_list(entry, "frames", record, frames=True) + self.media_list(entry, "images", record)
        fields: dict[str, Any] = {"content": text, "media": media, "error": _text(entry["error"]) if entry.get("error") else None}
        if kind_name == "tool":
            fields.update(agent=entry.get("agent") or "tool", kind=StepKind.tool_result,
                          tool_name=entry.get("name") or entry.get("tool_name"), tool_result=entry.get("content"))
        elif kind_name == "assistant":
            calls = self.tool_calls(entry["tool_calls"], record) if entry.get("tool_calls") else []
            fields.update(agent=entry.get("agent") or entry.get("name") or "assistant",
                          kind=StepKind.tool_call if calls else StepKind.message)
            if calls:
                fields["tool_name"] = ", ".join(c["name"] for c in calls)
                fields["tool_arguments"] = calls[0]["arguments"] if len(calls) == 1 else calls
        elif kind_name == "user":
            fields.update(agent=entry.get("agent") or entry.get("name") or "user", kind=StepKind.human)
        else:
            fields.update(agent=entry.get("agent") or "system", kind=StepKind.message, role=StepRole.control)
        if kind_name != "tool" and executor_name(fields["agent"]):
            fields["role"] = StepRole.executor_output
        native = entry.get("step", i)
        return Step(index=i, native_id=str(native), metadata={"kind": kind_name}, **fields)

    def action_step(self, entry: dict, i: int, record: str, default_agent: str) -> Step:
        number = entry.get("step_number")
        if number is None or isinstance(number, bool) or not isinstance(number, (int, str)):
            raise self.fail(record, "step_number", f"expected an integer or a step id such as '1.1', got {number!r}")
        is_plan = entry.get("type") == "planning" or "plan" in entry
        code = entry.get("code")
        calls = self.tool_calls(entry["tool_calls"], record) if entry.get("tool_calls") else []
        thought = entry.get("plan") if is_plan else entry.get("model_output", entry.get("thought"))
        fields: dict[str, Any] = {
            "agent": entry.get("agent") or default_agent,
            "content": _text(thought),
            # smolagents itself writes the plural names; both spellings are read.
            "media": (self.media_list(entry, "observation_images", record) + self.media_list(entry, "observations_images", record)
                      + self.media_list(entry, "frames", record, frames=True)),
            "tool_result": entry.get("observation", entry.get("observations")),
            "error": _text(entry["error"]) if entry.get("error") else None,
        }
        if is_plan:
            fields["kind"] = StepKind.plan
        elif "final_answer" in entry:
            fields.update(kind=StepKind.final_answer, content=fields["content"] or _text(entry["final_answer"]))
        elif code is not None:
            fields.update(kind=StepKind.tool_call, tool_name="python", tool_arguments=code)
        elif calls:
            fields.update(kind=StepKind.tool_call, tool_name=", ".join(c["name"] for c in calls),
                          tool_arguments=calls[0]["arguments"] if len(calls) == 1 else calls)
        else:
            fields["kind"] = StepKind.llm_call
        return Step(index=i, native_id=str(number).strip(), metadata={"type": "planning" if is_plan else "action"}, **fields)

    def agent_step(self, entry: dict, i: int, record: str) -> Step:
        for key in ("round", "position"):
            if isinstance(entry[key], bool) or not isinstance(entry[key], int):
                raise self.fail(record, key, f"expected an integer, got {entry[key]!r}")
        if not isinstance(entry.get("agent"), str) or not entry["agent"].strip():
            raise self.fail(record, "agent", "an agent turn needs the agent's name")
        text, media = self.content_and_parts(entry.get("output"), record)
        media += self.media_list(entry, "images", record) + self.media_list(entry, "frames", record, frames=True)
        return Step(index=i, agent=entry["agent"].strip(), kind=StepKind.message, content=text, media=media,
                    role=StepRole.executor_output if executor_name(entry["agent"]) else StepRole.decision,
                    error=_text(entry["error"]) if entry.get("error") else None,
                    native_id=f"{entry['round']}:{entry['position']}",
                    metadata={k: entry[k] for k in ("role", "round", "position") if entry.get(k) is not None})

    def step(self, entry: Any, i: int, default_agent: str) -> Step:
        record = f"trajectory[{i}]"
        try:
            return self._step(entry, i, default_agent, record)
        except ValidationError as exc:
            raise from_validation_error(self.source, record, exc) from None

    def _step(self, entry: Any, i: int, default_agent: str, record: str) -> Step:
        if not isinstance(entry, dict):
            raise self.fail(record, None, f"expected an object, got {type(entry).__name__}")
        if "kind" in entry:
            if entry["kind"] not in CHAT_KINDS:
                raise self.fail(record, "kind", f"unknown message kind {entry['kind']!r}; expected one of {', '.join(sorted(CHAT_KINDS))}")
            return self.chat_step(entry, i, record)
        if "step_number" in entry or entry.get("type") in ("planning", "action"):
            return self.action_step(entry, i, record, default_agent)
        if "round" in entry and "position" in entry:
            return self.agent_step(entry, i, record)
        raise self.fail(record, None, f"unknown trajectory entry shape (keys: {', '.join(sorted(entry)) or 'none'}); "
                        "expected a chat message (kind), a planning/action entry (step_number) or an agent turn (round, position)")

    # -- the whole file ------------------------------------------------------

    def require(self, obj: dict, key: str, kind: type | tuple[type, ...], prefix: str = "") -> Any:
        if key not in obj or obj[key] is None:
            raise self.fail(None, prefix + key, "missing")
        if not isinstance(obj[key], kind):
            raise self.fail(None, prefix + key, f"has the wrong type ({type(obj[key]).__name__})")
        return obj[key]

    def agents(self) -> list[AgentInfo]:
        value = self.data.get("agents") or []
        if not isinstance(value, list):
            raise self.fail(None, "agents", "expected a list")
        out = []
        for i, agent in enumerate(value):
            if isinstance(agent, str):
                out.append(AgentInfo(name=agent))
            elif isinstance(agent, dict) and isinstance(agent.get("name"), str):
                out.append(AgentInfo(name=agent["name"], role=_text(agent.get("role")), description=_text(agent.get("description"))))
            else:
                raise self.fail(None, f"agents[{i}]", "expected a name or an object with `name`")
        return out

    def trace(self, subset: str | None) -> Trace:
        d = self.data
        trace_id = self.require(d, "id", (str, int))
        modality = self.require(d, "modality", str)
        if modality not in MODALITIES:
            raise self.fail(None, "modality", f"{modality!r} is not one of text, image, video")
        task = self.require(d, "task", dict)
        gold = self.require(d, "ground_truth", dict)
        trajectory = self.require(d, "trajectory", list)
        if not trajectory:
            raise self.fail(None, "trajectory", "is empty")
        agents = self.agents()
        default_agent = agents[0].name if len(agents) == 1 else "agent"
        steps = [self.step(entry, i, default_agent) for i, entry in enumerate(trajectory)]

        by_native: dict[str, Step] = {}
        for s in steps:
            if s.native_id in by_native:
                raise self.fail(f"trajectory[{s.index}]", "step", f"step id {s.native_id!r} repeats trajectory[{by_native[s.native_id].index}]'s")
            by_native[s.native_id] = s  # type: ignore[index]
        native = native_step_of(gold, self.source)
        if native not in by_native:
            sample = ", ".join(list(by_native)[:8])
            raise self.fail(None, "ground_truth.step", f"no trajectory entry has step id {native!r} (ids: {sample}{', ...' if len(by_native) > 8 else ''})")
        mode = gold.get("mode")
        if mode is not None and mode not in BY_CODE:
            raise self.fail(None, "ground_truth.mode", f"{mode!r} is not a taxonomy code (e.g. R.2, A.1)")
        gold_agent = gold.get("agent")
        step_agents = {s.agent for s in steps}
        if gold_agent is not None and gold_agent not in step_agents:
            raise self.fail(None, "ground_truth.agent", f"{gold_agent!r} produced no step (agents: {', '.join(sorted(step_agents))})")

        options = task.get("options")
        if options is not None and not isinstance(options, list):
            raise self.fail(None, "task.options", "expected a list")
        answer = task.get("answer")
        metadata = {"topology": d["topology"]} if d.get("topology") is not None else {}
        try:
            return Trace(
                id=str(trace_id),
                task=Task(query=_text(self.require(task, "query", str, "task.")),
                          reference_answer=_text(answer) if answer is not None else None,
                          options=[_text(o) for o in options] if options is not None else None,
                          attachments=self.media_list(task, "images", "task")),
                agents=agents,
                steps=steps,
                outcome=Outcome(success=False, evaluator=FORMAT, detail="Who&When Pro traces are failures by construction"),
                source=Source(framework=str(self.require(d, "framework", str)), benchmark=str(self.require(d, "benchmark", str)),
                              modality=modality, format=FORMAT, native_id=str(trace_id), subset=subset),
                gold=GoldLabel(step=by_native[native].index, agent=gold_agent, mode=mode, native_step=native,
                               reason=_text(gold.get("reason")) or None),
                metadata=metadata,
            )
        except ValidationError as exc:
            raise from_validation_error(self.source, None, exc) from None


def parse_whowhenpro(data: Any, path: Path, subset: str | None = None) -> Trace:
    if not isinstance(data, dict):
        raise InputError(str(path), None, None, f"expected a JSON object, got {type(data).__name__}")
    return _Parser(data, path).trace(subset)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _sniff(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG"):
        return "image/png"
    if raw.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None
