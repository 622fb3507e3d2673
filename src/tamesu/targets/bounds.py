"""A response of any size never multiplies: past the target's `max_response_bytes` a turn is truncated, and
the truncation is recorded (a `response_truncated` event), before anything is graded or written.

This bounds what tamesu keeps, grades and writes (text, response, raw documents) for every target type. The
rest target also stops reading a body at the limit (`_rest_body`); a2a, grpc, mcp and the model target
refuse an answer past it as they read it (`tamesu.net.bounded`, gRPC's `max_receive_message_length`, mcp's
stdout lines in `_mcp_stdio`).
"""

from __future__ import annotations

import json

from tamesu.conversation import AgentTurn, Session

DEFAULT_MAX_RESPONSE_BYTES = 4_000_000
_EXCERPT_CHARS = 2_000


_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
"""`json.dumps(value, ensure_ascii=False, default=str)`'s encoder, made once rather than on every call."""


def _size(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8", errors="replace"))
    return len(_JSON.encode(value).encode("utf-8", errors="replace"))


def cut_text(text: str, limit: int) -> str:
    """`text` in at most `limit` bytes of UTF-8, cut on a character boundary."""
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


def _stand_in(value: object, size: int) -> dict[str, object]:
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return {"truncated": True, "bytes": size, "excerpt": shown[:_EXCERPT_CHARS]}


def bound_turn(turn: AgentTurn, limit: int, session: Session, index: int) -> AgentTurn:
    """The turn as tamesu keeps it: text cut at `limit` bytes, documents larger than `limit` replaced by
    `{truncated, bytes, excerpt}`; said in a `response_truncated` event when anything was cut."""
    cut: dict[str, int] = {}
    text_size = _size(turn.text)
    if text_size > limit:
        turn.text = cut_text(turn.text, limit)
        cut["text"] = text_size
    raw = []
    for number, doc in enumerate(turn.raw):
        size = _size(doc)
        if size > limit:
            cut[f"raw[{number}]"] = size
            raw.append(_stand_in(doc, size))
        else:
            raw.append(doc)
    if cut and any(key.startswith("raw") for key in cut):
        if turn.raw and turn.response is turn.raw[-1]:
            turn.response = raw[-1]  # the same document: cut once, kept once
        turn.raw = raw
    if turn.response is not (turn.raw[-1] if turn.raw else None):
        response_size = _size(turn.response)
        if response_size > limit:
            cut["response"] = response_size
            turn.response = _stand_in(turn.response, response_size)
    if cut:
        session.event("response_truncated", turn=index, limit=limit, sizes=cut,
                      note=f"turn {index}: the response was larger than max_response_bytes ({limit}): "
                           f"{', '.join(f'{k} {v} bytes' for k, v in cut.items())} cut")
    return turn


def checked_turn(answer: object, kind: str) -> AgentTurn:
    """What a target's `send` (or `listen`) returned, when it is a turn; a plug-in's target that returns anything
    else fails the run saying so, not with an error about an attribute its value lacks deeper in the engine."""
    if isinstance(answer, AgentTurn):
        return answer
    from tamesu import plugins
    from tamesu.errors import InfraError

    raise InfraError(f"the {kind} target ({plugins.origin('targets', kind)}) answered a turn with "
                     f"{type(answer).__name__}, not an AgentTurn")
