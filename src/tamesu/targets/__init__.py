"""Target types. Each is one module; this registry imports it only when a suite uses it."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tamesu.targets.base import Target

_IMPLEMENTED: dict[str, str] = {
    "rest": "tamesu.targets.rest:RestTarget",
    "model": "tamesu.targets.model:ModelTarget",
    "a2a": "tamesu.targets.a2a:A2ATarget",
    "mcp": "tamesu.targets.mcp:McpTarget",
    "browser": "tamesu.targets.browser:BrowserTarget",
    "grpc": "tamesu.targets.grpc_turn:GrpcTarget",
    "realtime": "tamesu.targets.realtime:RealtimeTarget",
    "twilio": "tamesu.targets.twilio:TwilioTarget",
    "voice": "tamesu.targets.voice:VoiceTarget",
    "pipecat": "tamesu.targets.pipecat:PipecatTarget",
    "sip": "tamesu.targets.sip:SipTarget",
    "livekit": "tamesu.targets.livekit:LiveKitTarget",
}

# Every type the Concepts page names, with its own keys, so `validate` can say a key belongs to another type.
KEYS_BY_TYPE: dict[str, set[str]] = {
    "browser": {"url", "engine", "viewport", "locale", "storage_state", "allowed_domains", "headless", "model",
                "chat", "load_timeout", "step_timeout", "trace", "cdp_url"},
    "rest": {"url", "method", "headers", "request", "response", "streaming", "session"},
    "livekit": {"url", "api_key", "api_secret", "room", "identity", "dispatch", "agent_identity", "mode", "topic",
                "reply_topic", "idle", "join_timeout"},
    "sip": {"direction", "to", "from", "trunk", "ring_timeout", "max_duration", "inbound_number", "trigger",
            "listen", "answer_after", "idle", "greeting"},
    "realtime": {"url", "headers", "model", "session_update", "tool_results", "done_tool", "mode",
                 "audio_format", "turn_detection", "max_responses"},
    "grpc": {"url", "headers", "mode"},
    "pipecat": {"url", "headers", "mode", "sample_rate", "idle", "greeting", "tool_results", "session"},
    "twilio": {"url", "from", "to", "parameters", "idle"},
    "model": {"system", "system_file", "tools", "fallback", "temperature", "max_tokens", "max_tool_rounds",
              "model"},
    "mcp": {"command", "args", "env", "url", "headers", "allow_tools", "call_timeout", "model", "system"},
    "a2a": {"url", "transport", "headers", "stream", "push", "skill", "metadata"},
    "voice": {"url", "headers", "audio", "messages", "session", "idle", "tool_results"},
}


_SHUTDOWN: list[Callable[[], Awaitable[None]]] = []


def on_shutdown(release: Callable[[], Awaitable[None]]) -> None:
    """A target module's process-wide resource (the one browser every browser test shares), released once
    when the run ends by `shutdown()`."""
    if release not in _SHUTDOWN:
        _SHUTDOWN.append(release)


async def shutdown() -> None:
    """Release what target modules share across runs; called by the engine when a run ends."""
    for release in list(_SHUTDOWN):
        await release()
DTMF_TYPES = ("twilio", "voice", "sip", "livekit", "pipecat")
"""The target types whose protocol carries DTMF digits (a `dtmf` script step)."""
_ALWAYS_AUDIO = ("twilio", "voice", "sip")
_AUDIO_MODE = ("realtime", "pipecat", "livekit")


def has_audio(kind: str, spec: object) -> bool:
    """Whether a target of this type and configuration speaks audio (so a persona's voice and behaviours
    mean something): always for phone-like types, with `mode: audio` for the others."""
    return kind in _ALWAYS_AUDIO or (kind in _AUDIO_MODE and getattr(spec, "mode", None) == "audio")


def sends_dtmf(kind: str, spec: object = None) -> bool:
    """Whether a target of this type (and configuration, when given) can send digits: a `voice` target only
    when its `messages.dtmf` says how its protocol carries them."""
    if kind == "voice" and spec is not None:
        return getattr(getattr(spec, "messages", None), "dtmf", None) is not None
    return kind in DTMF_TYPES


def known_types() -> list[str]:
    return sorted(KEYS_BY_TYPE)


def is_implemented(kind: str) -> bool:
    return kind in _IMPLEMENTED


def target_class(kind: str) -> type[Target]:
    module_name, _, class_name = _IMPLEMENTED[kind].partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def foreign_key_owner(kind: str, key: str) -> str | None:
    """The other target type a key belongs to, when it is not a key of `kind` itself."""
    if key in KEYS_BY_TYPE.get(kind, set()):
        return None
    for other, keys in KEYS_BY_TYPE.items():
        if other != kind and key in keys:
            return other
    return None
