"""Which keys of a built-in target's configuration are rendered once, when the target opens, before the first
turn: a `{{captured.NAME}}` there can never have a value, since nothing has been said yet. Read from each type's
`open` (the keys a turn renders again, such as a rest request's body and headers, are not here)."""

from __future__ import annotations

from collections.abc import Mapping

_OPENED: dict[str, tuple[str, ...]] = {
    "a2a": ("url", "headers", "metadata", "push.url"),
    "browser": ("url",),
    "grpc": ("url", "headers"),
    "livekit": ("url", "room", "api_key", "api_secret"),
    "mcp": ("command", "args", "env", "url", "headers", "system"),
    "model": ("system",),
    "pipecat": ("url", "headers"),
    "realtime": ("url", "headers"),
    "rest": ("session.id", "response.listen.url"),
    "sip": ("to", "from", "trunk", "headers", "trigger"),
    "twilio": ("url", "from", "to", "parameters"),
    "voice": ("url", "headers", "messages.open", "audio.send"),
}
"""Beside every type's `session.open`, which is made as the target opens."""

_REST_WEBSOCKET = ("url", "headers")
"""A rest target with `streaming: websocket` connects as it opens: its url and headers are the handshake's."""


def opened_key(kind: str, raw_target: Mapping[str, object], path: tuple[object, ...]) -> str | None:
    """The key (as written: `push.url`) holding `path` of a target of type `kind` that is rendered when the
    target opens, or None when that part of its configuration is rendered later (or the type is a plug-in's,
    whose `open` tamesu does not know: the engine says it when the target opens)."""
    if kind not in _OPENED:
        return None
    opened = ("session.open", *_OPENED[kind])
    if kind == "rest" and raw_target.get("streaming") == "websocket":
        opened = (*opened, *_REST_WEBSOCKET)
    for key in opened:
        parts = tuple(key.split("."))
        if path[:len(parts)] == parts:
            return key
    return None
