"""Reading an agent's answers: JSONPaths, text, conditions, tool calls, streamed events and handoffs."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonpath

from tamesu.conversation import Handoff, ToolCall, TurnError
from tamesu.targets._tool_arguments import read_arguments
from tamesu.targets.base import HandoffSpec
from tamesu.targets.rest.http import excerpt
from tamesu.targets.rest.spec import Condition, PathEquals, ResponseSpec
from tamesu.targets.rest.stream_errors import error_event, stream_failure

DEFAULT_DELTA = "$.delta"
OPENAI_DELTA = "$.choices[0].delta.content"
"""Where an OpenAI-style stream's chunks (`chat.completion.chunk`: vLLM, LiteLLM, agents served as OpenAI's API)
carry the reply's text; read there when `response.delta` is not set and the event has that shape."""
OLLAMA_DELTA = "$.message.content"
OLLAMA_GENERATE_DELTA = "$.response"
"""Where Ollama's streamed chunks (`{model, message: {role, content}, done}`, `/api/generate`'s `{model, response,
done}`) carry the reply's text."""
# A stream that sends more than this in one turn is not a reply any more; memory stays bounded.
MAX_EVENTS = 100_000
COMMON_TEXT_PATHS = (
    "$.reply", "$.response", "$.answer", "$.message", "$.output", "$.content", "$.result",
    "$.choices[0].message.content", "$.reply.text", "$.message.content", "$.data.text", "$.output_text",
    "$.output.content", "$.content[*].text",
)
"""Where agents commonly put their reply, tried in order when `response.text` was not set and `$.text` is empty."""
_KEYS_SHOWN = 12


@functools.lru_cache(maxsize=256)
def _compiled(path: str) -> jsonpath.JSONPath | jsonpath.CompoundJSONPath:
    return jsonpath.compile(path)


_DOTTED = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


@functools.lru_cache(maxsize=256)
def _dotted_keys(path: str) -> tuple[str, ...] | None:
    """The keys of a path made of names only (`$.text`, `$.reply.text`: the defaults and most suites'), which
    is read by looking the keys up; None for any other path, which python-jsonpath reads."""
    return tuple(path[2:].split(".")) if _DOTTED.fullmatch(path) else None


_LEADING = re.compile(r"\$\.([A-Za-z_][A-Za-z0-9_]*)[.\[]")


@functools.lru_cache(maxsize=256)
def leading_key(path: str) -> str | None:
    """The name a longer path starts with (`choices` of `$.choices[0].message.tool_calls`), None for a path that
    starts otherwise or joins paths (`|`, `&`). A document without that key holds nothing for the path: every
    turn asks its answer for OpenAI's and Anthropic's tool calls, and python-jsonpath took some twenty calls
    to find none."""
    if "|" in path or "&" in path:
        return None
    found = _LEADING.match(path)
    return found.group(1) if found else None


def values(path: str, doc: object) -> list[Any]:
    """What a JSONPath finds in a document; nothing in a document that is not JSON structure.

    python-jsonpath would parse a string document as JSON, so a plain-text answer is never queried. A path of
    names only is read with dict lookups, as python-jsonpath reads it (tests/engine/test_hot_path.py compares the two):
    its matching machinery cost three such paths a turn 0.05 ms.
    """
    if not isinstance(doc, dict | list | Mapping):  # a dict first: the ABC's check is a call of its own
        return []
    keys = _dotted_keys(path)
    if keys is None:
        leading = leading_key(path)
        if leading is not None and isinstance(doc, dict | Mapping) and leading not in doc:
            return []
        return list(_compiled(path).findall(doc))
    found: object = doc
    for key in keys:
        if not isinstance(found, dict | Mapping) or key not in found:
            return []
        found = found[key]
    return [found]


def searched(status: int, doc: object) -> str:
    """The answer a capture's JSONPath found nothing in, as a user reads it: an empty one, one that is not JSON
    (a path finds nothing in text), or the JSON itself."""
    if doc is None or doc == "":
        return f"the answer is empty (HTTP {status})"
    shown = excerpt(doc)
    return f"the answer is not JSON (HTTP {status}): {shown}" if isinstance(doc, str) else f"the answer was {shown}"


def describe_keys(doc: object) -> str:
    """`its keys: a, b, c` (a list: its length and the first item's keys), short whatever the document."""
    if isinstance(doc, list):
        first = f"; the first item's keys: {_key_list(doc[0])}" if doc and isinstance(doc[0], Mapping) else ""
        return f"the answer is a list of {len(doc)}{first}"
    return f"its keys: {_key_list(doc)}" if isinstance(doc, Mapping) and doc else "it is an empty object"


def keys_of(docs: Sequence[object]) -> str:
    """What the first JSON document of several (a stream's events, posts) holds, short: `the first's keys: a, b`
    (`its keys` when it is the only one)."""
    first = next((doc for doc in docs if isinstance(doc, Mapping | list)), None)
    whose, which = ("its", "it") if len(docs) == 1 else ("the first's", "the first")
    if isinstance(first, Mapping) and first:
        return f"{whose} keys: {_key_list(first)}"
    return f"{which} is a list of {len(first)}" if isinstance(first, list) else f"{which} is an empty object"


def _key_list(doc: Mapping[str, object]) -> str:
    keys = [str(k)[:40] for k in list(doc)[:_KEYS_SHOWN]]
    more = f" (and {len(doc) - _KEYS_SHOWN} more)" if len(doc) > _KEYS_SHOWN else ""
    return ", ".join(keys) + more


def as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def text_of(path: str, doc: object, joiner: str = "\n") -> str:
    """The text at `path`: several matches (`$[*].text`) are joined; a plain-text document is its own text."""
    if isinstance(doc, str):
        return doc
    return texts(values(path, doc), joiner)


def texts(found: Sequence[object], joiner: str = "\n") -> str:
    """What a path found as one text: each value's (a document's JSON), the empty ones left out."""
    return joiner.join([text for value in found if (text := as_text(value))])


def holds(condition: Condition | None, doc: object) -> bool:
    if condition is None:
        return False
    if isinstance(condition, PathEquals):
        return any(v == condition.equals for v in values(condition.path, doc))
    return any(bool(v) for v in values(condition, doc))


def first_value(path: str, docs: Iterable[object]) -> object:
    """The first value `path` finds, looking at the latest document first."""
    for doc in reversed(list(docs)):
        found = [v for v in values(path, doc) if v is not None]
        if found:
            return found[0]
    return None


def tool_calls(path: str, docs: Iterable[object]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for doc in docs:
        found = values(path, doc)
        if found:  # most answers hold none, and every turn asks four paths when response.tool_calls is not set
            calls.extend(_tool_call(item, path) for item in _tool_items(found))
    return calls


def _tool_items(found: Sequence[object]) -> list[object]:
    items: list[object] = []
    for value in found:
        if isinstance(value, list):
            items.extend(value)
        elif value is not None:
            items.append(value)
    return items


def _tool_call(item: object, path: str) -> ToolCall:
    """A tool call as agents write it: {name, args|arguments|input, result|output}, or OpenAI's {function: ...}."""
    if not isinstance(item, Mapping):
        raise TurnError(f"response.tool_calls ({path}): expected objects with a name, got {excerpt(item)}")
    raw_function = item.get("function")
    function: Mapping[str, object] = raw_function if isinstance(raw_function, Mapping) else {}
    name = item.get("name") or item.get("tool") or function.get("name")
    if not isinstance(name, str) or not name:
        raise TurnError(f"response.tool_calls ({path}): a call without a name: {excerpt(item)}")
    args = _first_present(item, "args", "arguments", "input", "parameters")
    if args is None:
        args = function.get("arguments")
    result = _first_present(item, "result", "output")
    return ToolCall(name=name, args=tool_arguments(args, name), result=result)


def _first_present(item: Mapping[str, object], *keys: str) -> object:
    for key in keys:
        if item.get(key) is not None:
            return item[key]
    return None


def tool_arguments(value: object, tool: str) -> dict[str, object]:
    # Many APIs send arguments as a JSON string (OpenAI does); assertions compare objects.
    if isinstance(value, str):
        try:
            value = read_arguments(value, tool) if value.strip() else {}
        except json.JSONDecodeError:
            return {"_raw": value}
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {"value": value}


class StreamText:
    """Folds streamed events (sse, websocket) into the turn's text and first-token time.

    Each event's chunk is its `delta` (default `$.delta`; an event without one gives its `response.text`
    unless `delta` was set). An error event (`stream_errors`) fails the turn, unless a `final` of the suite's
    own says it is the turn's end. The event that completes the turn (`final`) may carry the whole reply in
    `response.text` instead: it replaces what was streamed when it repeats it, else it is the last chunk.
    """

    def __init__(self, reply: ResponseSpec) -> None:
        self._reply = reply
        self._delta = reply.delta or DEFAULT_DELTA
        self._text_fallback = reply.delta is None
        self.chunks: list[str] = []
        self.events: list[object] = []
        self.first_token_at_ms: float | None = None
        self.detected: str | None = None
        """The path the chunks were read at when `response.delta` was not set and another shape was recognised."""
        self._read_deltas = False
        self.found = False
        """Some event held something where the reply is looked for (empty or not), or was text itself: a stream
        where nothing was found was read in the wrong place, not one that said nothing."""

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def add(self, event: object, at_ms: float) -> bool:
        """Take one event; True when it completes the turn."""
        if len(self.events) >= MAX_EVENTS:
            raise TurnError(f"more than {MAX_EVENTS} streamed events in one turn")
        self.events.append(event)
        final = holds(self._reply.final, event)
        if error_event(event) and not (final and "final" in self._reply.model_fields_set):
            raise stream_failure(event)
        chunk = self._chunk(event, final)
        if chunk:
            self.chunks.append(chunk)
        if self.first_token_at_ms is None and self.text:
            self.first_token_at_ms = at_ms
        return final

    def _chunk(self, event: object, final: bool) -> str:
        if isinstance(event, str):
            self.found = True
            return event
        deltas = values(self._delta, event)
        self.found = self.found or bool(deltas)
        if deltas and self._text_fallback:
            self._read_deltas = True
            # `$.delta` as typed streams use it: OpenAI's Responses events carry the model's reasoning in `delta`
            # too (`response.reasoning_text.delta`), Anthropic's a block (`{"type": "text_delta", "text"}`, or
            # `thinking_delta`, `input_json_delta`): only the reply's text is the reply
            if _is_reasoning(event):
                return ""
            return "".join(_text_delta(v) for v in deltas)
        if deltas:
            chunk = "".join(as_text(v) for v in deltas)
            if final and self.text.strip() and chunk.strip().startswith(self.text.strip()):
                # the closing event repeats the whole reply at the delta's path too: it is the text, as below
                self.chunks.clear()
            return chunk
        if self._text_fallback and (openai := _openai_chunk(event)) is not None:
            self.detected, self.found = OPENAI_DELTA, True
            return openai
        if self._text_fallback and (found := _ollama_chunk(event)) is not None:
            (self.detected, chunk), self.found = found, True
            return chunk
        if not (self._text_fallback or final) or (self._read_deltas and not final):
            # after deltas, an event that is not the last holds no more of the reply: a typed stream's closing
            # event repeats the whole text (OpenAI's `response.output_text.done`)
            return ""
        at_text = values(self._reply.text, event)
        self.found = self.found or bool(at_text)
        text = texts(at_text)
        if final and text and text.strip().startswith(self.text.strip()):
            # The final event repeats the whole reply: it is the text, not one more chunk.
            self.chunks.clear()
        return text


_RESPONSES_TEXT = ("response.output_text.delta", "response.refusal.delta")
"""Of OpenAI's Responses events with a `delta`, those whose delta is the reply (not a function call's arguments,
audio, code, reasoning)."""


def _is_reasoning(event: object) -> bool:
    """An event whose `delta` is no part of the reply: reasoning, thinking, or a Responses event of another kind."""
    kind = event.get("type") if isinstance(event, Mapping) else None
    return isinstance(kind, str) and ("reasoning" in kind or "thinking" in kind
                                      or (kind.startswith("response.") and kind not in _RESPONSES_TEXT))


def _text_delta(value: object) -> str:
    """A delta's text: a string as it is; a typed block (Anthropic's) only when it is text."""
    if not isinstance(value, Mapping):
        return as_text(value)
    kind = value.get("type")
    if kind is not None and kind not in ("text_delta", "text"):
        return ""  # thinking_delta, input_json_delta...
    for key in ("text", "content"):
        found = value.get(key)
        if isinstance(found, str):
            return found
    return ""  # an object without text (Anthropic's closing `message_delta`: a stop reason) says nothing


def _openai_chunk(event: object) -> str | None:
    """The text of an OpenAI-style chunk (`{"choices": [{"delta": {"content": ...}}]}`; its reasoning, a tool
    call's pieces or the last chunk's finish give ""), or None for an event of another shape."""
    choices = event.get("choices") if isinstance(event, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    delta = first.get("delta") if isinstance(first, Mapping) else None
    if not isinstance(delta, Mapping):
        return None
    content = delta.get("content")
    return content if isinstance(content, str) else ""


def _ollama_chunk(event: object) -> tuple[str, str] | None:
    """Where an Ollama stream's chunk has its text (`/api/chat`'s `message.content`, never its `thinking`;
    `/api/generate`'s `response`) and that text; None for an event of another shape. Without its `model` (a relay
    that drops it) a chat chunk is still Ollama's when nothing else reads so: a `done` that is true or false beside
    an assistant's `message` with text (its `response` alone, a key many answers have, is not)."""
    if not isinstance(event, Mapping) or "done" not in event:
        return None
    named = "model" in event
    message = event.get("message")
    if isinstance(message, Mapping) and isinstance(message.get("content"), str) and (named or (
            isinstance(event["done"], bool) and message.get("role", "assistant") == "assistant")):
        return OLLAMA_DELTA, message["content"]
    said = event.get("response")
    return (OLLAMA_GENERATE_DELTA, said) if named and isinstance(said, str) else None


def handoff(spec: HandoffSpec | None, text: str, docs: Sequence[object]) -> Handoff | None:
    """The agent handed over when `json_path` finds a truthy value in any document, or `regex` is in its text."""
    if spec is None:
        return None
    by_path = spec.json_path is not None and any(holds(spec.json_path, doc) for doc in docs)
    by_text = spec.regex is not None and re.search(spec.regex, text) is not None
    if not (by_path or by_text):
        return None
    to = first_value(spec.to, docs) if spec.to else None
    summary = first_value(spec.summary, docs) if spec.summary else None
    return Handoff(to=None if to is None else as_text(to), summary=None if summary is None else as_text(summary))
