"""One turn's two halves: the user's message as A2A sends it, and what the agent's answers add up to."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from a2a.types.a2a_pb2 import Message, Part, Role
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct, Value

from tamesu.conversation import TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.targets.a2a._normalize import ends_turn, merged, task_id_of
from tamesu.targets.a2a._read import has_text
from tamesu.types import JSONObject, JSONValue, json_object


def _as_json(value: object) -> JSONValue:
    # YAML can hold dates and other values JSON has no type for; they travel as their text.
    parsed: JSONValue = json.loads(json.dumps(value, default=str))
    return parsed


def turn_metadata(target: Mapping[str, object], turn: UserTurn) -> dict[str, object]:
    """The message's metadata: the target's, then a JSONL test's `options.metadata` for its own turns, and the
    design's `options.skip` (`{"history": true}`: keep no record of this call), which has no other place in A2A."""
    metadata = dict(target)
    options = turn.options or {}
    if isinstance(options.get("metadata"), dict):
        metadata.update(options["metadata"])
    if isinstance(options.get("skip"), dict):
        metadata["skip"] = options["skip"]
    return metadata


def user_message(turn: UserTurn, *, base_dir: Path, context_id: str | None, task_id: str | None,
                 metadata: Mapping[str, object], what: str) -> Message:
    """The turn as one message with a fresh messageId: a text part for the words, a data part for `data`,
    a file part per file (its bytes inline when it has a path, else its URI). A turn that carries the
    conversation before it (a stateless test's message history) sends it first, as a data part
    `{"history": [{"role": "user" | "agent", "text": ...}, ...]}` (A2A has no field for earlier messages a
    client writes, and a task's own history is the agent's to keep)."""
    parts: list[Part] = []
    if turn.history:
        parts.append(history_part(turn))
    if turn.text or (turn.data is None and not turn.files):
        parts.append(Part(text=turn.text))
    if turn.data is not None:
        value = Value()
        ParseDict(_as_json(turn.data), value)  # type: ignore[arg-type]  # protobuf's stub says dict; a Value takes any JSON
        parts.append(Part(data=value))
    for file in turn.files:
        if file.path:
            path = base_dir / file.path
            try:
                content = path.read_bytes()
            except OSError as exc:
                raise InfraError(f"{what}: cannot read the file {file.name} ({path}): "
                                 f"{exc.strerror or exc}") from exc
            parts.append(Part(raw=content, filename=file.name, media_type=file.mime))
        elif file.uri:
            parts.append(Part(url=file.uri, filename=file.name, media_type=file.mime))
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=parts,
                      context_id=context_id or "", task_id=task_id or "")
    if metadata:
        struct = Struct()
        ParseDict(json_object(_as_json(metadata)), struct)
        message.metadata.CopyFrom(struct)
    return message


def history_part(turn: UserTurn) -> Part:
    """The earlier messages as one data part, in A2A's roles (`agent` for the assistant)."""
    earlier = [{"role": "agent" if m.role == "assistant" else m.role,
                "text": "\n".join([m.content, *(f"[{f.name}]" for f in m.files)]) if m.files else m.content}
               for m in turn.history]
    value = Value()
    ParseDict({"history": earlier}, value)
    return Part(data=value)


class Progress:
    """Everything one turn received, in order (`raw`), and the task (or message) as it now stands (`doc`)."""

    def __init__(self, observe: Callable[[JSONObject], None], *,
                 stale_status: JSONValue = None) -> None:
        self._observe = observe
        self._stale_status = stale_status
        """The status the continued task stopped at last turn: seen again in the task read back, it is old news,
        not an answer (an agent asked to return at once answers a follow-up with the task as it was; a stream may
        open with the task as it stands). None when nothing can be old news: a blocking message/send answers
        after the agent read the message, and an agent may well ask the same question again in the same words."""
        self._status_is_news = False
        """The status as it stands came in a status-update event of this turn's stream, which the agent sends
        when it sets one: an answer even when it repeats the last one word for word. Not so a pushed one: it may
        have waited in the listener's queue since the last turn."""
        self.raw: list[JSONObject] = []
        self.doc: JSONObject | None = None
        self.first_text_at: float | None = None
        self.last_at: float | None = None

    def add(self, doc: JSONObject, at: float, *, streamed: bool = False) -> None:
        self.raw.append(doc)
        self.doc = merged(self.doc, doc)
        if doc.get("kind") in ("task", "status-update"):
            self._status_is_news = streamed and doc.get("kind") == "status-update"
        if self.first_text_at is None and has_text(doc):
            self.first_text_at = at
        self.last_at = at
        self._observe(doc)

    def add_polled(self, doc: JSONObject, at: float) -> None:
        """A tasks/get answer: kept only when it says something new, so a long wait is not 100 copies."""
        if doc != self.doc:
            self.add(doc, at)

    @property
    def task_id(self) -> str | None:
        return None if self.doc is None else task_id_of(self.doc)

    @property
    def settled(self) -> bool:
        if self.doc is None or not ends_turn(self.doc):
            return False
        return self._stale_status is None or self._status_is_news or self.doc.get("status") != self._stale_status


def followed_task(progress: Progress) -> str:
    """The id of the task a turn waits for; an agent that leaves a task unsettled without an id fails it."""
    task_id = progress.task_id
    if task_id is None:
        raise TurnError("the agent answered with an unfinished task that has no id", raw=progress.doc)
    return task_id
