"""Tool calls a stream tells piece by piece, in the shapes the common model APIs stream them (an agent relaying
its model's stream): OpenAI's chat chunks (`choices[0].delta.tool_calls`, a name then the arguments' JSON in
fragments, by `index`), Anthropic's Messages events (a `tool_use` block's start, then its `input_json_delta`s, by
block `index`), OpenAI's Responses events (`response.output_item.done` holding a whole `function_call`) and
Ollama's native chat chunks (`message.tool_calls`, each call whole, its arguments an object).
Read when the target does not say where its stream's tool calls are (`response.tool_calls`).

A chunk's piece is added to the call at its `index` unless it carries an `id` other than that call's: Ollama's
OpenAI-compatible endpoint sends each call whole with an id of its own, and older versions of it put every call at
index 0 (two calls read as one, their arguments run together). Arguments that come whole as an object are taken
as they are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tamesu.conversation import ToolCall
from tamesu.targets.rest.read import tool_arguments


@dataclass
class _Pieces:
    name: str = ""
    arguments: str = ""
    given: object = None
    """Arguments that came whole (an Anthropic block's `input` when no delta followed, an object in a chunk)."""
    id: str = ""


class StreamedToolCalls:
    def __init__(self) -> None:
        self._calls: dict[str, _Pieces] = {}
        self._at_index: dict[object, str] = {}
        """A chunk's `index` -> the key of the call its pieces go to now."""

    def add(self, event: object) -> None:
        if not isinstance(event, Mapping):
            return
        kind = event.get("type")
        if kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                self._calls[f"block-{event.get('index')}"] = _Pieces(name=str(block.get("name") or ""),
                                                                    given=block.get("input"))
        elif kind == "content_block_delta":
            delta = event.get("delta")
            call = self._calls.get(f"block-{event.get('index')}")
            if call is not None and isinstance(delta, Mapping) and delta.get("type") == "input_json_delta":
                call.arguments += str(delta.get("partial_json") or "")
        elif kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                key = f"item-{item.get('call_id') or item.get('id') or len(self._calls)}"
                self._calls[key] = _Pieces(name=str(item.get("name") or ""), arguments=str(item.get("arguments") or ""))
        else:
            self._add_chunk(event)

    def _add_chunk(self, event: Mapping[str, object]) -> None:
        message = event.get("message")
        whole = message.get("tool_calls") if isinstance(message, Mapping) else None
        for item in whole if isinstance(whole, list) else []:  # Ollama's native chunk: each call whole
            function = item.get("function") if isinstance(item, Mapping) else None
            if isinstance(function, Mapping):
                self._calls[f"whole-{len(self._calls)}"] = _Pieces(name=str(function.get("name") or ""),
                                                                  given=function.get("arguments"))
        choices = event.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        delta = first.get("delta") if isinstance(first, Mapping) else None
        pieces = delta.get("tool_calls") if isinstance(delta, Mapping) else None
        for piece in pieces if isinstance(pieces, list) else []:
            if not isinstance(piece, Mapping):
                continue
            call = self._piece_of(piece)
            function = piece.get("function")
            if isinstance(function, Mapping):
                call.name = str(function.get("name") or call.name)
                arguments = function.get("arguments")
                if isinstance(arguments, Mapping):
                    call.given = arguments
                elif arguments:
                    call.arguments += str(arguments)

    def _piece_of(self, piece: Mapping[str, object]) -> _Pieces:
        """The call a chunk's piece belongs to: the one at its index, or a new one when its id is another's."""
        index, given_id = piece.get("index", 0), piece.get("id")
        key = self._at_index.get(index)
        call = self._calls.get(key) if key is not None else None
        if call is None or (given_id and call.id and given_id != call.id):
            key = f"chunk-{index}-{len(self._calls)}"
            call = self._calls[key] = _Pieces()
            self._at_index[index] = key
        if given_id and not call.id:
            call.id = str(given_id)
        return call

    @property
    def calls(self) -> list[ToolCall]:
        return [ToolCall(name=call.name,
                         args=tool_arguments(call.arguments if call.arguments else call.given, call.name))
                for call in self._calls.values() if call.name]
