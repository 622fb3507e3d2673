"""The agent's turn as words, read from a task or a message in the shape of `_normalize`.

A task reads as its status message, then the text of the artifacts not read in an earlier turn (the parts added
since, or all of an artifact the agent replaced: a draft revised in place); when both are empty, as the agent's
messages in the history after the user's message. A plain message reads as its parts. Text parts are the words,
data parts are JSON (so a judge can read them), file parts are `[name]`; parts are joined by newlines, except that
adjacent text parts of one artifact join as they are, because an agent that streams its answer appends it to one
artifact a few words at a time.
"""

from __future__ import annotations

import json

from tamesu.types import JSONObject, JSONValue, json_list, json_object


def part_text(part: JSONValue) -> str:
    part = json_object(part)
    kind = part.get("kind")
    if kind == "data":
        return json.dumps(part.get("data"), ensure_ascii=False, sort_keys=True)
    if kind == "file":
        file = json_object(part.get("file"))
        return f"[{file.get('name') or file.get('uri') or 'file'}]"
    return str(part.get("text", ""))


def parts_text(parts: JSONValue, *, run_on: bool = False) -> str:
    """The parts as lines; with `run_on`, adjacent text parts are one line."""
    pieces: list[str] = []
    previous_text = False
    for part in json_list(parts):
        text = part_text(part)
        is_text = json_object(part).get("kind", "text") == "text"
        if run_on and is_text and previous_text and pieces:
            pieces[-1] += text
        elif text:
            pieces.append(text)
        previous_text = is_text
    return "\n".join(piece for piece in pieces if piece)


def has_text(doc: JSONObject) -> bool:
    """Whether a task, message or event carries words for the user (time_to_first_token_ms)."""
    kind = doc.get("kind")
    if kind == "message":
        return bool(parts_text(doc.get("parts")))
    if kind == "artifact-update":
        return bool(parts_text(json_object(doc.get("artifact")).get("parts")))
    message = json_object(doc.get("status")).get("message")
    if message and parts_text(json_object(message).get("parts")):
        return True
    return kind == "task" and any(parts_text(json_object(a).get("parts")) for a in json_list(doc.get("artifacts")))


class TurnReader:
    """Remembers what the session already read of each artifact, so a later turn reads only what is new."""

    def __init__(self) -> None:
        self._read: dict[tuple[str, str], list[JSONValue]] = {}
        """(task id, artifact id) -> the parts already read. Kept whole, not counted: an agent that replaces an
        artifact (append false) keeps its id and may keep its number of parts, and what it says then is new."""

    def text(self, doc: JSONObject | None, sent_message_id: str) -> str:
        if doc is None:
            return ""
        if doc.get("kind") == "message":
            return parts_text(doc.get("parts"))
        said: list[str] = []
        status_message = json_object(doc.get("status")).get("message")
        if status_message:
            said.append(parts_text(json_object(status_message).get("parts")))
        task_id = str(doc.get("id", ""))
        for artifact in map(json_object, json_list(doc.get("artifacts"))):
            key = (task_id, str(artifact.get("artifactId", "")))
            parts = json_list(artifact.get("parts"))
            read = self._read.get(key, [])
            unread = parts[len(read):] if parts[:len(read)] == read else parts
            said.append(parts_text(unread, run_on=True))
            self._read[key] = parts
        text = "\n".join(s for s in said if s)
        return text or self._history_after(doc, sent_message_id)

    @staticmethod
    def _history_after(doc: JSONObject, sent_message_id: str) -> str:
        history = [json_object(m) for m in json_list(doc.get("history"))]
        start = 0
        for index, message in enumerate(history):
            if message.get("messageId") == sent_message_id:
                start = index + 1
        return "\n".join(text for text in (parts_text(m.get("parts")) for m in history[start:]
                                           if m.get("role") == "agent") if text)
