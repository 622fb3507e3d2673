"""The events by which a streaming agent says its turn failed part-way: read as the reply, what it streamed before
(often a few words) was graded as the agent's whole answer, and a `not_contains` check passed on a broken turn;
and a broken event among JSON ones, which was read as a chunk of text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from tamesu.conversation import TurnError
from tamesu.matching import one_line

ERROR_TYPES = frozenset({"error", "response.failed"})
"""`type`s of an error event: Anthropic's and OpenAI Responses' `error`, the Responses API's `response.failed`."""
SAID_LIMIT = 300


def stream_failure(said: object, status: int | None = None) -> TurnError:
    """The turn's failure, in the agent's words (`said`: what the error event carried)."""
    return TurnError(f"the agent's stream reported an error: {error_words(said)}", raw=said, status=status)


def error_event(event: object) -> bool:
    """An event that reports the turn failed: `{"type": "error", ...}` (Anthropic, OpenAI Responses, the AI SDK),
    `{"type": "response.failed"}`, `{"object": "error"}` (vLLM) or an object of an `error` alone (OpenAI's and
    LiteLLM's chat streams)."""
    if not isinstance(event, Mapping):
        return False
    return event.get("type") in ERROR_TYPES or event.get("object") == "error" \
        or (set(event) == {"error"} and bool(event["error"]))


def error_words(said: object) -> str:
    """What the error says: `kind: message` where it names both, else its message, else the event itself."""
    if isinstance(said, Mapping):
        inner = said.get("error")
        if inner is None and isinstance(said.get("response"), Mapping):
            inner = said["response"].get("error")  # response.failed
        if isinstance(inner, Mapping):
            return error_words(inner)
        if isinstance(inner, str) and inner:
            return one_line(inner, SAID_LIMIT)
        message = said.get("message") or said.get("errorText")
        kind = said.get("type") if said.get("type") not in ERROR_TYPES else said.get("code")
        if isinstance(message, str) and message:
            return one_line(f"{kind}: {message}" if isinstance(kind, str) and kind else message, SAID_LIMIT)
    text = said if isinstance(said, str) else json.dumps(said, ensure_ascii=False)
    # cut at a word with … before the masking: a secret the cut falls in is dropped or masked by its head (cut
    # bare, its first characters were said)
    return one_line(text, SAID_LIMIT) or "no details"


def malformed_event(events: Sequence[object]) -> TurnError | None:
    """An event that is not JSON though it starts as an object, in a stream whose other events are JSON: a
    broken event, whose text would be spliced into the reply. A text stream (no JSON event) may send a brace."""
    if not any(isinstance(event, str) for event in events) or not any(isinstance(e, Mapping) for e in events):
        return None
    for number, event in enumerate(events, 1):
        if isinstance(event, str) and event.lstrip().startswith("{"):
            try:
                json.loads(event)
            except json.JSONDecodeError as exc:
                shown = one_line(event, SAID_LIMIT)
                return TurnError(f"malformed JSON in event {number} of the stream, whose other events are JSON: "
                                 f"{exc}: {shown}", raw=list(events), events=True)
    return None
