"""Who&When Pro (2026) importer: one JSON file per failed trace.

The format as published is described in docs/datasets.md. In short, top level:
`id`, `framework`, `benchmark`, `modality` (text/image/video), `task` {query,
answer, options?, images?}, `ground_truth`, `trajectory`, and per framework
some of `agents` [{id, role}], `topology` {layers, sink_nodes}, `final_answer`,
`termination`, `eval_status`, `eval_error_preview`, `video_context`.

In a folder laid out as published (`data/traces/*.json` beside `assets/`),
only `data/traces/` is read, and media paths are relative to the site root (the
parent of `data/`). One file uses one trajectory shape, told from its entries. Each entry becomes
one `Step` and keeps a native step id (`Step.native_id`), which is what the
gold label points at and what the scorer compares:

    chat             {kind: system|user|assistant|tool, content, tool_calls?, frames?}
                     id: the entry's 0-based position in `trajectory`
    planning/action  {kind: user}, {kind: planning, plan}, {kind: action, step_number, ...}
                     id: "0" for the planning entry, `step_number` for an action
    agent turns      {kind: user}, {kind: agent, agent, round, position, output, phase}
                     id: "ROUND.POSITION" (the gold `step` is written "R.P")
    graph nodes      {kind: user}, {agent_id, role, stage, output}, {kind: final_answer}
                     id: "AGENT:LAYER.POSITION", LAYER the agent's layer in
                     `topology.layers` (node number i is the agent `node_i`; the
                     sink sits in no layer: LAYER "sink"), POSITION the entry's
                     rank among that agent's

Entries the gold label cannot point at (the user's, a final answer) get "#INDEX".
The shapes of the paper's description (a planning/action entry with
`step_number` and no `kind`, an agent turn {agent, round, position} with id
"ROUND:POSITION") are still read.

Fields that give the gold answer away (`ground_truth`, the mode code in `id`,
an entry's `injected`, `is_injected`, `is_replayed` and `phase`, a list) are kept
under `metadata["answer_key"]`, which `middleware.model.answer_key.attributor_view`
removes before any attributor sees the trace; the trace's id drops the mode
segment. `task.answer` is the reference answer, which the runner hides unless
asked. `task.options` is an object {"A": text, ...}, shown as "A. text" choices.

Media are a path, a `data:` URI or an object {path | data | uri, mime_type?,
index?, time_s?}. A relative path is looked up in the trace's folder, then each
parent up to the dataset folder and its parent, the site root, then `media_root` if given; one
found nowhere is an error naming the file, the entry and the field. An entry of
an unknown shape is an error too, never skipped.
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

from faultlens.middleware.model.answer_key import ANSWER_KEY
from faultlens.middleware.errors import InputError, from_validation_error
from faultlens.middleware.model.trace import AgentInfo, GoldLabel, Media, Outcome, Source, Step, StepKind, StepRole, Task, Trace
from faultlens.middleware.model.roles import executor_name
from faultlens.middleware.model.taxonomy import BY_CODE

from .media_files import media_dirs, sniff_mime
from .whowhen import json_files, read_json, subset_of

FORMAT = "whowhenpro"
CHAT_KINDS = {"system", "user", "assistant", "tool"}
MODALITIES = {"text", "image", "video"}
PUBLISHED_TRACES = Path("data") / "traces"

# The trajectory shapes (one per file).
CHAT, PLANNING, TURNS, GRAPH = "chat", "planning/action", "agent turns", "graph nodes"
SHAPE_KINDS = {PLANNING: ("user", "planning", "action", "final_answer"), TURNS: ("user", "agent", "final_answer"),
               GRAPH: ("user", "final_answer")}

# What reveals the gold label (kept only under metadata["answer_key"]).
LEAKING_TOP_FIELDS = ("ground_truth",)
LEAKING_ENTRY_FIELDS = ("injected", "is_injected", "is_replayed", "phase")
ID_SEPARATOR = "__"


def read_whowhenpro(directory: str | Path, media_root: str | Path | None = None) -> Iterator[Trace]:
    """Yield one failed `Trace` with its gold label per Who&When Pro file.

    `media_root`: one more folder relative media paths are looked up in, after
    the trace's folder and its parents up to `directory` and its parent."""
    root = Path(directory)
    top = root.parent if root.is_file() else root
    # As published, the traces sit in data/traces/ beside assets/: read only them there,
    # so other JSON files of the release (under assets/, say) are not taken for traces.
    traces = root / PUBLISHED_TRACES if (root / PUBLISHED_TRACES).is_dir() else root
    extra = [Path(media_root)] if media_root is not None else []
    for path in json_files(traces, f"whowhenpro:{directory}"):
        yield parse_whowhenpro(read_json(path), path, subset_of(path, traces), media_dirs(path, top, site_root=PUBLISHED_TRACES.parts[0]) + extra)


def detect_shape(trajectory: list) -> str:
    """The file's trajectory shape, from its entries' `kind`s and keys."""
    entries = [e for e in trajectory if isinstance(e, dict)]
    kinds = {e["kind"] for e in entries if isinstance(e.get("kind"), str)}
    if kinds & {"planning", "action"}:
        return PLANNING
    if "agent" in kinds:
        return TURNS
    if any("kind" not in e and "agent_id" in e for e in entries):
        return GRAPH
    return CHAT  # also the paper's kind-less entries, told apart one by one


def native_step_of(gold: dict, source: str, shape: str = CHAT) -> str:
    """The gold step as a native id string (see the module docstring)."""
    if shape == GRAPH:
        for key in ("agent", "round", "position"):
            value = gold.get(key)
            if value is None or isinstance(value, bool) or not isinstance(value, (int, str)) or (key != "agent" and not isinstance(value, int)):
                raise InputError(source, None, f"ground_truth.{key}", f"a graph-node trace's gold label needs `{key}`"
                                 f"{' (an integer)' if key != 'agent' else ''}, got {value!r}")
        return f"{gold['agent']}:{gold['round']}.{gold['position']}"
    if "step" in gold and gold["step"] is not None:
        step = gold["step"]
        if isinstance(step, bool) or not isinstance(step, (int, str)) or (isinstance(step, str) and not step.strip()):
            raise InputError(source, None, "ground_truth.step", f"expected an integer or a step id such as '1.1', got {step!r}")
        return str(step).strip()
    if "round" in gold and "position" in gold:
        for key in ("round", "position"):
            if isinstance(gold[key], bool) or not isinstance(gold[key], int):
                raise InputError(source, None, f"ground_truth.{key}", f"expected an integer, got {gold[key]!r}")
        return f"{gold['round']}{'.' if shape == TURNS else ':'}{gold['position']}"
    raise InputError(source, None, "ground_truth.step", "missing: give `step`, or `round` and `position`")


class _Parser:
    def __init__(self, data: dict, path: Path, dirs: list[Path] | None = None):
        self.data, self.path, self.source = data, path, str(path)
        self.dirs = dirs if dirs is not None else [path.parent]
        self.leaks: dict[str, dict[str, Any]] = {}
        self.agent_layer: dict[str, int] = {}
        self.agent_turns: dict[str, int] = {}
        self.plans = 0
        self.sinks: set[str] = set()

    def fail(self, record: str | None, field: str | None, message: str) -> InputError:
        return InputError(self.source, record, field, message)

    # -- media ---------------------------------------------------------------

    def locate(self, relative: str, record: str | None, field: str) -> Path:
        given = Path(relative)
        candidates = [given] if given.is_absolute() else [d / given for d in self.dirs]
        for candidate in candidates:
            if candidate.is_file():
                return candidate.resolve()
        looked = ", ".join(str(c.parent) for c in candidates)
        raise self.fail(record, field, f"image file not found: {relative} (looked in {looked}); "
                        "if the media sit elsewhere, give --media-root DIR")

    def media(self, value: Any, record: str | None, field: str, frame_index: int | None = None) -> Media:
        path_field = field
        if isinstance(value, str):
            value = {"data": value} if value.startswith("data:") else {"path": value}
        elif isinstance(value, dict):
            path_field = f"{field}.path"
        if not isinstance(value, dict):
            raise self.fail(record, field, f"expected an image path, a data: URI or an object, got {type(value).__name__}")
        mime = value.get("mime_type") or value.get("mime")
        frame = value.get("frame_index", value.get("index", frame_index))
        timestamp = value.get("timestamp", value.get("timestamp_s", value.get("time_s")))
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
            mime = mime or sniff_mime(raw)
            if not mime:
                raise self.fail(record, field, "inline media without a MIME type that cannot be recognised; add mime_type")
            return Media(mime_type=mime, data=data, frame_index=frame, timestamp_s=timestamp)
        if value.get("path") is not None:
            location = self.locate(str(value["path"]), record, path_field)
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
            function = call.get("function")
            fn = function if isinstance(function, dict) else call
            name = fn.get("name")
            if not name or not isinstance(name, str):
                raise self.fail(record, f"tool_calls[{i}].name", f"expected the tool's name, got {name!r}")
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
        metadata = {"kind": kind_name} | ({"tool_call_id": entry["tool_call_id"]} if entry.get("tool_call_id") else {})
        return Step(index=i, native_id=str(native), metadata=metadata, **fields)

    def action_step(self, entry: dict, i: int, record: str, default_agent: str) -> Step:
        is_plan = entry.get("kind") == "planning" or entry.get("type") == "planning" or "plan" in entry
        number = entry.get("step_number")
        if is_plan and number is None and entry.get("kind") == "planning":
            # As published, the planning entry has no step number: the gold label calls it 0.
            number = "0" if self.plans == 0 else f"#{i}"
            self.plans += 1
        if number is None or isinstance(number, bool) or not isinstance(number, (int, str)):
            raise self.fail(record, "step_number", f"expected an integer or a step id such as '1.1', got {number!r}")
        code = entry.get("code")
        calls = self.tool_calls(entry["tool_calls"], record) if entry.get("tool_calls") else []
        thought = entry.get("plan") if is_plan else entry.get("reasoning", entry.get("model_output", entry.get("thought")))
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
        elif "final_answer" in entry or entry.get("is_final_answer") is True:
            fields.update(kind=StepKind.final_answer, content=fields["content"] or _text(entry.get("final_answer")))
            if code is not None:
                fields.update(tool_name="python", tool_arguments=code)
        elif code is not None:
            fields.update(kind=StepKind.tool_call, tool_name="python", tool_arguments=code)
        elif calls:
            fields.update(kind=StepKind.tool_call, tool_name=", ".join(c["name"] for c in calls),
                          tool_arguments=calls[0]["arguments"] if len(calls) == 1 else calls)
        else:
            fields["kind"] = StepKind.llm_call
        return Step(index=i, native_id=str(number).strip(), metadata={"type": "planning" if is_plan else "action"}, **fields)

    def agent_step(self, entry: dict, i: int, record: str) -> Step:
        """An agent turn: the paper's (no `kind`, id "R:P") or as published (`kind: agent`, id "R.P")."""
        published = entry.get("kind") == "agent"
        for key in ("round", "position"):
            if key not in entry:
                raise self.fail(record, key, "missing: an agent turn needs `round` and `position`")
            if isinstance(entry[key], bool) or not isinstance(entry[key], int):
                raise self.fail(record, key, f"expected an integer, got {entry[key]!r}")
        agent = entry.get("agent")
        if isinstance(agent, int) and not isinstance(agent, bool):
            agent = str(agent)
        if not isinstance(agent, str) or not agent.strip():
            raise self.fail(record, "agent", "an agent turn needs the agent's id")
        text, media = self.content_and_parts(entry.get("output"), record)
        media += self.media_list(entry, "images", record) + self.media_list(entry, "frames", record, frames=True)
        metadata = {k: entry[k] for k in ("role", "round", "position", "ledger") if entry.get(k) is not None}
        fields: dict[str, Any] = {"kind": StepKind.message}
        actions = entry.get("tool_actions")
        if actions:
            names = [a.get("name") or a.get("tool") for a in actions if isinstance(a, dict)] if isinstance(actions, list) else []
            fields.update(kind=StepKind.tool_call, tool_arguments=actions,
                          tool_name=", ".join(str(n) for n in names if n) or None)
        return Step(index=i, agent=agent.strip(), content=text, media=media,
                    role=StepRole.executor_output if executor_name(agent) else StepRole.decision,
                    error=_text(entry["error"]) if entry.get("error") else None,
                    native_id=f"{entry['round']}{'.' if published else ':'}{entry['position']}", metadata=metadata, **fields)

    def node_step(self, entry: dict, i: int, record: str) -> Step:
        """A graph node's output: its id is the agent, its layer in the topology and its rank among the agent's entries."""
        agent = entry.get("agent_id")
        if agent is None or isinstance(agent, bool) or not isinstance(agent, (int, str)) or not str(agent).strip():
            raise self.fail(record, "agent_id", f"expected the node's agent id, got {agent!r}")
        agent = str(agent).strip()
        if agent not in self.agent_layer and agent not in self.sinks:
            raise self.fail(record, "agent_id", f"agent {agent!r} is in no layer of topology.layers and is no sink node")
        # The sink (`node_out`) sits in no layer; the gold label never points at it.
        layer: int | str = self.agent_layer.get(agent, "sink")
        position = self.agent_turns.get(agent, 0)
        self.agent_turns[agent] = position + 1
        text, media = self.content_and_parts(entry.get("output"), record)
        media += self.media_list(entry, "images", record)
        metadata = {k: entry[k] for k in ("role", "stage") if entry.get(k) is not None} | {"round": layer, "position": position}
        return Step(index=i, agent=agent, kind=StepKind.message, content=text, media=media,
                    error=_text(entry["error"]) if entry.get("error") else None,
                    native_id=f"{agent}:{layer}.{position}", metadata=metadata)

    def other_step(self, entry: dict, i: int, record: str) -> Step:
        """The user's entry or the final answer in a non-chat shape: steps the gold label never points at."""
        text, media = self.content_and_parts(entry.get("content"), record)
        media += self.media_list(entry, "images", record) + self.media_list(entry, "frames", record, frames=True)
        if entry["kind"] == "user":
            return Step(index=i, agent="user", kind=StepKind.human, content=text, media=media, native_id=f"#{i}",
                        metadata={"kind": "user"})
        agent = next(iter(self.sinks)) if len(self.sinks) == 1 else "system"
        return Step(index=i, agent=_text(entry.get("agent")) or agent, kind=StepKind.final_answer, content=text, media=media,
                    native_id=f"#{i}", metadata={"kind": "final_answer"})

    def step(self, entry: Any, i: int, default_agent: str, shape: str) -> Step:
        record = f"trajectory[{i}]"
        try:
            if isinstance(entry, dict):
                self.keep_leaks(entry, i)
            return self._step(entry, i, default_agent, record, shape)
        except ValidationError as exc:
            raise from_validation_error(self.source, record, exc) from None

    def keep_leaks(self, entry: dict, i: int) -> None:
        leaks = {k: entry[k] for k in LEAKING_ENTRY_FIELDS if k in entry}
        if leaks:
            self.leaks[str(i)] = leaks

    def _step(self, entry: Any, i: int, default_agent: str, record: str, shape: str) -> Step:
        if not isinstance(entry, dict):
            raise self.fail(record, None, f"expected an object, got {type(entry).__name__}")
        if entry.get("kind") is not None and not isinstance(entry["kind"], str):
            raise self.fail(record, "kind", f"expected a string such as 'user', got {type(entry['kind']).__name__}")
        if shape != CHAT:
            kind = entry.get("kind")
            if kind is None and shape == GRAPH:
                return self.node_step(entry, i, record)
            if kind is None and shape == PLANNING and ("step_number" in entry or entry.get("type") in ("planning", "action")):
                return self.action_step(entry, i, record, default_agent)
            if kind not in SHAPE_KINDS[shape]:
                expected = ", ".join(SHAPE_KINDS[shape]) + (" or no kind (a node's output)" if shape == GRAPH else "")
                raise self.fail(record, "kind", f"{kind!r} is not an entry of a {shape} trajectory; expected {expected}")
            if kind in ("user", "final_answer"):
                return self.other_step(entry, i, record)
            if kind == "agent":
                return self.agent_step(entry, i, record)
            return self.action_step(entry, i, record, default_agent)
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
                continue
            # The paper's description names agents by `name`; the published files by `id`.
            name = agent.get("name", agent.get("id")) if isinstance(agent, dict) else None
            if isinstance(name, bool) or not isinstance(name, (str, int)) or not str(name).strip():
                raise self.fail(None, f"agents[{i}]", "expected a name or an object with `id` (or `name`)")
            out.append(AgentInfo(name=str(name).strip(), role=_text(agent.get("role")), description=_text(agent.get("description"))))
        return out

    def gold_mode_and_agent(self, gold: dict, steps: list[Step], blamed: Step, native: str) -> tuple[str | None, str | None]:
        """The gold label's mode (a taxonomy code) and agent (one that produced the entry it points at)."""
        mode = gold.get("mode")
        if mode is not None and (not isinstance(mode, str) or mode not in BY_CODE):
            raise self.fail(None, "ground_truth.mode", f"{mode!r} is not a taxonomy code (e.g. R.2, A.1)")
        gold_agent = gold.get("agent")
        if gold_agent is not None and not isinstance(gold_agent, bool) and isinstance(gold_agent, int):
            gold_agent = str(gold_agent)
        if gold_agent is not None and not isinstance(gold_agent, str):
            raise self.fail(None, "ground_truth.agent", f"expected an agent id or null, got {type(gold_agent).__name__}")
        step_agents = {s.agent for s in steps}
        if gold_agent is not None and gold_agent not in step_agents:
            raise self.fail(None, "ground_truth.agent", f"{gold_agent!r} produced no step (agents: {', '.join(sorted(step_agents))})")
        if gold_agent is not None and blamed.agent != gold_agent:
            raise self.fail(None, "ground_truth.agent", f"{gold_agent!r}, but the entry the label points at "
                            f"(trajectory[{blamed.index}], step id {native!r}) is by {blamed.agent!r}")
        return mode, gold_agent

    def options(self, value: Any) -> list[str] | None:
        """The choices: a list, or as published an object {"A": "Horse", ...} shown as "A. Horse"."""
        if value is None:
            return None
        if isinstance(value, dict):
            for key, text in value.items():
                if not isinstance(text, (str, int, float)) or isinstance(text, bool):
                    raise self.fail(None, f"task.options.{key}", f"expected the option's text, got {type(text).__name__}")
            return [f"{key}. {text}" for key, text in value.items()]
        if isinstance(value, list):
            return [_text(o) for o in value]
        raise self.fail(None, "task.options", f"expected an object {{\"A\": text, ...}} or a list, got {type(value).__name__}")

    def layers(self, agents: list[AgentInfo]) -> None:
        """Each agent's layer in `topology.layers` ({"0": [node numbers], ...}), for graph-node traces.

        As published, node number `i` is the agent `node_i`; an agent whose `agents[].role`
        is a sink (`node_out`, role `sink_node`) sits in no layer."""
        topology = self.data.get("topology")
        layers = topology.get("layers") if isinstance(topology, dict) else None
        if not isinstance(layers, dict) or not layers:
            raise self.fail(None, "topology.layers", "a graph-node trajectory needs its layers: {\"0\": [node numbers], ...}")
        names = {a.name for a in agents}
        self.sinks = {a.name for a in agents if a.role and "sink" in a.role.lower()}
        for key, nodes in layers.items():
            if not str(key).strip().isdigit():
                raise self.fail(None, f"topology.layers.{key}", "a layer's key is its number (\"0\", \"1\", ...)")
            if not isinstance(nodes, list):
                raise self.fail(None, f"topology.layers.{key}", "expected a list of node numbers")
            for j, node in enumerate(nodes):
                if isinstance(node, bool) or not isinstance(node, (int, str)):
                    raise self.fail(None, f"topology.layers.{key}[{j}]", f"expected a node number, got {node!r}")
                agent = f"node_{node}" if f"node_{node}" in names else str(node)
                if agent in self.agent_layer:
                    raise self.fail(None, f"topology.layers.{key}", f"node {node!r} is also in layer {self.agent_layer[agent]}")
                self.agent_layer[agent] = int(str(key).strip())

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
        shape = detect_shape(trajectory)
        if shape == GRAPH:
            self.layers(agents)
        steps = [self.step(entry, i, default_agent, shape) for i, entry in enumerate(trajectory)]

        by_native: dict[str, Step] = {}
        for s in steps:
            if s.native_id in by_native:
                raise self.fail(f"trajectory[{s.index}]", "step", f"step id {s.native_id!r} repeats trajectory[{by_native[s.native_id].index}]'s")
            by_native[s.native_id] = s  # type: ignore[index]
        native = native_step_of(gold, self.source, shape)
        if native not in by_native:
            ids = [n for n in by_native if not n.startswith("#")]
            sample = ", ".join(ids[:8])
            field = "ground_truth" if shape == GRAPH else "ground_truth.step"
            raise self.fail(None, field, f"no trajectory entry has step id {native!r} (ids: {sample}{', ...' if len(ids) > 8 else ''})")
        mode, gold_agent = self.gold_mode_and_agent(gold, steps, by_native[native], native)
        options = self.options(task.get("options"))
        answer = task.get("answer")
        metadata: dict[str, Any] = {k: d[k] for k in ("topology", "final_answer", "termination", "eval_status", "eval_error_preview")
                                    if d.get(k) is not None}
        metadata["trajectory_shape"] = shape
        answer_key: dict[str, Any] = {k: d[k] for k in LEAKING_TOP_FIELDS if k in d}
        blind = blind_id(str(trace_id), mode)
        if blind != str(trace_id):
            answer_key["id"] = str(trace_id)
        if self.leaks:
            answer_key["entries"] = self.leaks
        metadata[ANSWER_KEY] = answer_key
        task_metadata = {"video_context": d["video_context"]} if d.get("video_context") is not None else {}
        if isinstance(task.get("options"), dict):
            task_metadata["options"] = task["options"]
        # eval_status / eval_error_preview are the outcome a user would see (not the label).
        detail = "Who&When Pro traces are failures by construction"
        if d.get("eval_status") is not None:
            detail += f" (eval_status: {_text(d['eval_status'])})"
        if d.get("eval_error_preview") is not None:
            detail += f"; evaluation output: {_text(d['eval_error_preview'])}"
        try:
            return Trace(
                id=blind,
                task=Task(query=_text(self.require(task, "query", str, "task.")),
                          reference_answer=_text(answer) if answer is not None else None,
                          options=options,
                          attachments=self.media_list(task, "images", "task"), metadata=task_metadata),
                agents=agents,
                steps=steps,
                outcome=Outcome(success=False, evaluator=FORMAT, detail=detail),
                source=Source(framework=str(self.require(d, "framework", str)), benchmark=str(self.require(d, "benchmark", str)),
                              modality=modality, format=FORMAT, native_id=blind, subset=subset),
                gold=GoldLabel(step=by_native[native].index, agent=gold_agent, mode=mode, native_step=native,
                               reason=_text(gold.get("reason")) or None),
                metadata=metadata,
            )
        except ValidationError as exc:
            raise from_validation_error(self.source, None, exc) from None


def blind_id(trace_id: str, mode: Any) -> str:
    """The trace's id without the failure-mode code the published ids carry
    ("<framework>__<benchmark>__<mode>__<task>__<date>"): the code gives the label away."""
    parts = trace_id.split(ID_SEPARATOR)
    if len(parts) < 2:
        return trace_id
    def squash(text: str) -> str:
        return "".join(c for c in text.lower() if c.isalnum())
    code = squash(mode) if isinstance(mode, str) else None
    kept = [p for p in parts if not (code and squash(p) == code)]
    if len(kept) == len(parts) == 5 and squash(parts[2]) in {squash(c) for c in BY_CODE}:
        kept = parts[:2] + parts[3:]
    return ID_SEPARATOR.join(kept) or trace_id


def parse_whowhenpro(data: Any, path: Path, subset: str | None = None, dirs: list[Path] | None = None) -> Trace:
    """One Who&When Pro file's trace; `dirs`: where relative media paths are looked up (default: the file's folder)."""
    if not isinstance(data, dict):
        raise InputError(str(path), None, None, f"expected a JSON object, got {type(data).__name__}")
    return _Parser(data, path, dirs).trace(subset)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
