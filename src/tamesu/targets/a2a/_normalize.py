"""One result shape whatever the wire version: A2A 0.3's JSON vocabulary, which the A2A target page uses.

The SDK hands every binding and version to us as A2A 1.0 protobuf objects; this module writes them as the
documents `result.json` keeps and `json_path` reads:

- a task: `{"kind": "task", "id", "contextId", "status": {"state", "message"?, "timestamp"?},
  "artifacts": [...], "history": [...], "metadata"?}`; `state` is one of `submitted`, `working`,
  `input-required`, `auth-required`, `completed`, `failed`, `canceled`, `rejected` (`unknown` otherwise).
- a message: `{"kind": "message", "messageId", "role": "user" | "agent", "parts", "contextId"?, "taskId"?,
  "metadata"?, "referenceTaskIds"?, "extensions"?}`.
- a part: `{"kind": "text", "text"}`, `{"kind": "data", "data"}` (any JSON value) or
  `{"kind": "file", "file": {"name"?, "mimeType"?, "bytes" (base64) | "uri"}}`, each with `metadata`?.
- an artifact: `{"artifactId", "name"?, "description"?, "parts", "metadata"?, "extensions"?}`.
- stream events: `{"kind": "status-update", "taskId", "contextId", "status", "final", "metadata"?}` and
  `{"kind": "artifact-update", "taskId", "contextId", "artifact", "append", "lastChunk", "metadata"?}`;
  `final` is true when the state ends the turn (see SETTLED).

`merged` applies an event to the task as it stands, as the agent's own store does, so a streamed turn has
a whole task to show.
"""

from __future__ import annotations

import base64
import copy

from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from pydantic import BaseModel, ValidationError

from tamesu.matching import one_line
from tamesu.types import JSONObject, JSONValue, json_list, json_object, whole_numbers

STATES: dict[int, str] = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
}
WAITING = frozenset({"input-required", "auth-required"})
"""The agent waits for the user: the next user turn continues the task."""
ENDED = frozenset({"failed", "canceled", "rejected"})
"""The task, and with it the session, is over."""
SETTLED = WAITING | ENDED | {"completed", "unknown"}
"""States that end the agent's turn: everything but submitted and working."""

ROLES = {Role.ROLE_USER: "user", Role.ROLE_AGENT: "agent"}


def _put(doc: JSONObject, key: str, value: JSONValue) -> None:
    if value not in (None, "", [], {}):
        doc[key] = value


def _struct(holder: Part | Message | Artifact | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent,
            field: str) -> JSONObject | None:
    return whole_numbers(MessageToDict(getattr(holder, field))) if holder.HasField(field) else None


def part(p: Part) -> JSONObject:
    content = p.WhichOneof("content")
    doc: JSONObject
    if content == "data":
        doc = {"kind": "data", "data": whole_numbers(MessageToDict(p.data))}
    elif content in ("raw", "url"):
        file: JSONObject = {}
        _put(file, "name", p.filename)
        _put(file, "mimeType", p.media_type)
        if content == "raw":
            file["bytes"] = base64.b64encode(p.raw).decode("ascii")
        else:
            file["uri"] = p.url
        doc = {"kind": "file", "file": file}
    else:
        doc = {"kind": "text", "text": p.text}
    _put(doc, "metadata", _struct(p, "metadata"))
    return doc


def message(m: Message) -> JSONObject:
    doc: JSONObject = {"kind": "message", "messageId": m.message_id, "role": ROLES.get(m.role, "agent"),
                           "parts": [part(p) for p in m.parts]}
    _put(doc, "contextId", m.context_id)
    _put(doc, "taskId", m.task_id)
    _put(doc, "metadata", _struct(m, "metadata"))
    _put(doc, "referenceTaskIds", list(m.reference_task_ids))
    _put(doc, "extensions", list(m.extensions))
    return doc


def status(s: TaskStatus) -> JSONObject:
    doc: JSONObject = {"state": STATES.get(s.state, "unknown")}
    if s.HasField("message"):
        doc["message"] = message(s.message)
    if s.HasField("timestamp"):
        doc["timestamp"] = MessageToDict(s.timestamp)
    return doc


def artifact(a: Artifact) -> JSONObject:
    doc: JSONObject = {"artifactId": a.artifact_id}
    _put(doc, "name", a.name)
    _put(doc, "description", a.description)
    doc["parts"] = [part(p) for p in a.parts]
    _put(doc, "metadata", _struct(a, "metadata"))
    _put(doc, "extensions", list(a.extensions))
    return doc


def task(t: Task) -> JSONObject:
    doc: JSONObject = {"kind": "task", "id": t.id, "contextId": t.context_id, "status": status(t.status),
                           "artifacts": [artifact(a) for a in t.artifacts],
                           "history": [message(m) for m in t.history]}
    _put(doc, "metadata", _struct(t, "metadata"))
    return doc


def status_update(e: TaskStatusUpdateEvent) -> JSONObject:
    shown = status(e.status)
    doc: JSONObject = {"kind": "status-update", "taskId": e.task_id, "contextId": e.context_id,
                           "status": shown, "final": shown["state"] in SETTLED}
    _put(doc, "metadata", _struct(e, "metadata"))
    return doc


def artifact_update(e: TaskArtifactUpdateEvent) -> JSONObject:
    doc: JSONObject = {"kind": "artifact-update", "taskId": e.task_id, "contextId": e.context_id,
                           "artifact": artifact(e.artifact), "append": e.append, "lastChunk": e.last_chunk}
    _put(doc, "metadata", _struct(e, "metadata"))
    return doc


def stream_event(event: StreamResponse) -> JSONObject:
    which = event.WhichOneof("payload")
    if which == "task":
        return task(event.task)
    if which == "message":
        return message(event.message)
    if which == "status_update":
        return status_update(event.status_update)
    if which == "artifact_update":
        return artifact_update(event.artifact_update)
    raise ValueError("the agent sent an empty stream event")


_V10_PAYLOADS = ("task", "message", "statusUpdate", "artifactUpdate", "status_update", "artifact_update")
_V03_KINDS: dict[str, type[BaseModel]] = {
    "task": types_v03.Task, "message": types_v03.Message,
    "status-update": types_v03.TaskStatusUpdateEvent, "artifact-update": types_v03.TaskArtifactUpdateEvent,
}


def push_body(body: JSONValue) -> JSONObject:
    """A push notification in either version: A2A 1.0 posts a StreamResponse, A2A 0.3 the task itself."""
    if not isinstance(body, dict):
        raise ValueError("a push notification must be a JSON object")
    try:
        if any(key in body for key in _V10_PAYLOADS):
            return stream_event(ParseDict(body, StreamResponse(), ignore_unknown_fields=True))
        kind = body.get("kind")
        if kind is None and isinstance(body.get("status"), dict) and "id" in body:
            state = str(json_object(body["status"]).get("state", ""))
            if state.startswith("TASK_STATE_"):
                return task(ParseDict(body, Task(), ignore_unknown_fields=True))
            kind = "task"
        model = _V03_KINDS.get(str(kind))
        if model is None:
            raise ValueError(f"unknown kind {kind!r}")
        parsed = model.model_validate(body)
        wrapped = types_v03.SendStreamingMessageSuccessResponse(id=0, result=parsed)
        return stream_event(conversions.to_core_stream_response(wrapped))
    except (ParseError, ValidationError, KeyError, TypeError) as exc:
        raise ValueError(f"not an A2A task or event: {_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    return one_line(str(exc), 300) or type(exc).__name__


# -- reading documents ----------------------------------------------------------------------------------


def state_of(doc: JSONObject) -> str | None:
    """The task state a document reports, or None (a message, an artifact update)."""
    if doc.get("kind") in ("task", "status-update"):
        return str(json_object(doc.get("status")).get("state", "unknown"))
    return None


def task_id_of(doc: JSONObject) -> str | None:
    found = doc.get("id") if doc.get("kind") == "task" else doc.get("taskId")
    return str(found) if found else None


def ends_turn(doc: JSONObject) -> bool:
    """A plain message, or a task state the agent stops at."""
    if doc.get("kind") == "message":
        return True
    state = state_of(doc)
    return state is not None and state in SETTLED


def merged(current: JSONObject | None, event: JSONObject) -> JSONObject:
    """The task as it stands once `event` is applied (the event itself when it is a task or a message)."""
    kind = event.get("kind")
    if kind in ("task", "message"):
        return copy.deepcopy(event)
    if current is None or current.get("kind") != "task" or current.get("id") != event.get("taskId"):
        current = {"kind": "task", "id": event.get("taskId", ""), "contextId": event.get("contextId", ""),
                   "status": {"state": "submitted"}, "artifacts": [], "history": []}
    else:
        current = copy.deepcopy(current)
    if kind == "status-update":
        # The agent's store moves the previous status message into the history; so does this view.
        previous = json_object(current.get("status")).get("message")
        if previous is not None:
            history = current.setdefault("history", [])
            if isinstance(history, list):
                history.append(previous)
        current["status"] = copy.deepcopy(event["status"])
    elif kind == "artifact-update":
        incoming = json_object(copy.deepcopy(event["artifact"]))
        artifacts = current.setdefault("artifacts", [])
        if not isinstance(artifacts, list):
            return current
        for index, existing in enumerate(artifacts):
            if isinstance(existing, dict) and existing.get("artifactId") == incoming.get("artifactId"):
                if event.get("append"):
                    existing["parts"] = [*json_list(existing.get("parts")), *json_list(incoming.get("parts"))]
                else:
                    artifacts[index] = incoming
                break
        else:
            artifacts.append(incoming)
    return current
