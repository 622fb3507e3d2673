"""Target types. Each is one module; this registry imports it only when a suite uses it.

A type's keys are its spec model's fields, so `validate` can say that a key belongs to another type. Plug-ins
add types through the `tamesu.targets` entry points (see `tamesu.plugins`): a `Target` subclass with its `Spec`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from functools import cache
from typing import TYPE_CHECKING

from tamesu import plugins

if TYPE_CHECKING:
    from tamesu.targets.base import Target

_IMPLEMENTED: dict[str, str] = {
    "rest": "tamesu.targets.rest.target:RestTarget",
    "model": "tamesu.targets.model:ModelTarget",
    "a2a": "tamesu.targets.a2a:A2ATarget",
    "mcp": "tamesu.targets.mcp.target:McpTarget",
    "browser": "tamesu.targets.browser:BrowserTarget",
    "grpc": "tamesu.targets.grpc_turn.target:GrpcTarget",
    "realtime": "tamesu.targets.realtime.target:RealtimeTarget",
    "twilio": "tamesu.targets.twilio:TwilioTarget",
    "voice": "tamesu.targets.voice:VoiceTarget",
    "pipecat": "tamesu.targets.pipecat.target:PipecatTarget",
    "sip": "tamesu.targets.sip.target:SipTarget",
    "livekit": "tamesu.targets.livekit:LiveKitTarget",
}

# The types the Concepts page names that this version does not build yet, with the keys the page gives them,
# so a key of theirs written on another type is named as theirs. Each line goes when its type gets a module.
_PLANNED_KEYS: dict[str, frozenset[str]] = {}


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
    return sorted({*_IMPLEMENTED, *_PLANNED_KEYS, *plugins.names("targets")})


def is_known(kind: str) -> bool:
    return kind in _IMPLEMENTED or kind in _PLANNED_KEYS or plugins.has("targets", kind)


def is_implemented(kind: str) -> bool:
    return kind in _IMPLEMENTED or plugins.has("targets", kind)


def implemented_types() -> list[str]:
    return sorted({*_IMPLEMENTED, *plugins.names("targets")})


def target_class(kind: str) -> type[Target]:
    """The class of `kind`; raises KeyError for an unknown type, PluginError for a broken plug-in."""
    from tamesu.targets.base import Target

    if kind in _IMPLEMENTED:
        module_name, _, class_name = _IMPLEMENTED[kind].partition(":")
        return getattr(importlib.import_module(module_name), class_name)
    found = plugins.load("targets", kind)
    if not (isinstance(found, type) and issubclass(found, Target) and hasattr(found, "Spec")):
        raise plugins.PluginError(f"plug-in tamesu.targets:{kind} is not a Target class with a Spec")
    return found


@cache
def keys_of(kind: str) -> frozenset[str]:
    """The keys a target of `kind` takes: its spec model's fields and their aliases (or the declared keys of
    a type not built yet)."""
    if kind in _PLANNED_KEYS:
        return _PLANNED_KEYS[kind]
    fields = target_class(kind).Spec.model_fields
    return frozenset({*fields, *(f.alias for f in fields.values() if f.alias)})


def foreign_key_owner(kind: str, key: str) -> str | None:
    """The other target type a key belongs to, when it is not a key of `kind` itself. Reading another type's
    keys imports its module, which happens only for a key `kind` does not take; a type whose module cannot be
    imported here (an extra not installed) is passed over."""
    if key in keys_of(kind):
        return None
    for other in (t for t in [*_IMPLEMENTED, *_PLANNED_KEYS] if t != kind):
        try:
            if key in keys_of(other):
                return other
        except ImportError:
            continue  # its module needs an extra not installed here (numpy for the phone-like targets)
    return None
