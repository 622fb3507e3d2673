"""Target types. Each is one module whose class is marked `@register("targets", NAME)` (see
`tamesu.plugins`, through which plug-ins add theirs too); a module is imported only when a suite uses its type.

A type's keys are its spec model's fields, so `validate` can say that a key belongs to another type. What a
type can do (audio, DTMF, steps, tool calls) is said by its class's attributes (`targets.base.Target`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import TYPE_CHECKING

from tamesu import plugins

if TYPE_CHECKING:
    from tamesu.targets.base import Target, TargetSpec


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


def has_audio(kind: str, spec: object) -> bool:
    """Whether a target of this type and configuration speaks audio (so a persona's voice and behaviours
    mean something)."""
    return target_class(kind).has_audio(spec)


def sends_dtmf(kind: str, spec: object) -> bool:
    """Whether a target of this type and configuration can send digits (a `dtmf` script step)."""
    return target_class(kind).sends_dtmf(spec)


def dtmf_types() -> list[str]:
    """The built-in types whose protocol carries digits (imports them: only for a message about a problem)."""
    return [kind for kind in plugins.built_in_names("targets") if _importable(kind) and target_class(kind).dtmf]


def _importable(kind: str) -> bool:
    try:
        target_class(kind)
    except ImportError:
        return False  # its module needs an extra not installed here (numpy for the phone-like targets)
    return True


def declared_metrics() -> dict[str, frozenset[str]]:
    """What each built-in type says it measures (`Target.metric_names`), by type. It imports every built-in type's
    module, so it is asked only about a metric a suite's own targets do not measure; a type whose module cannot be
    imported here (an extra not installed) is passed over."""
    declared: dict[str, frozenset[str]] = {}
    for kind in plugins.built_in_names("targets"):
        try:
            names = target_class(kind).metric_names
        except Exception:  # a type this installation cannot load (a missing extra): its names are not asked
            continue
        if names:
            declared[kind] = names
    return declared


def types_said(kinds: list[str]) -> str:
    """`kinds` as a sentence names them: "the sip target", "the pipecat, realtime and voice targets"."""
    ordered = sorted(kinds)
    listed = " and ".join(filter(None, [", ".join(ordered[:-1]), *ordered[-1:]]))
    return f"the {listed} target{'s' if len(ordered) > 1 else ''}"


def known_types() -> list[str]:
    return plugins.names("targets")


def usable_types() -> list[str]:
    """The types a hint lists: an installed plug-in that cannot load, or is no Target, is left out (imported
    here, only for a message about a problem); a suite that names it is told why."""
    usable = []
    for kind in known_types():
        if not plugins.is_built_in("targets", kind):
            try:
                target_class(kind)
            except plugins.PluginError:
                continue
        usable.append(kind)
    return usable


def is_known(kind: str) -> bool:
    return plugins.has("targets", kind)


_checked: dict[str, type[Target[TargetSpec]]] = {}
"""The class each type last loaded as, once it passed target_class's checks: the plan and every run ask for their
test's class several times, and the checks (`inspect.isabstract` among them) were a dozen calls each time."""


def target_class(kind: str) -> type[Target[TargetSpec]]:
    """The class of `kind`; raises KeyError for an unknown type, PluginError for a broken plug-in."""
    found = plugins.load("targets", kind)
    checked = _checked.get(kind)
    if checked is not None and checked is found:
        return checked
    from tamesu.targets.base import Target, TargetSpec

    if not (isinstance(found, type) and issubclass(found, Target) and hasattr(found, "Spec")):
        raise plugins.PluginError(f"plug-in tamesu.targets:{kind} is not a Target class with a Spec")
    # what the loader and the engine read of every target: said once here rather than as an internal error there
    if not (isinstance(found.Spec, type) and issubclass(found.Spec, TargetSpec)):
        raise plugins.PluginError(f"plug-in tamesu.targets:{kind}: its Spec is not a TargetSpec subclass (a pydantic "
                                  "model of its keys)")
    if (unimplemented := plugins.unimplemented("targets", kind, found)) is not None:
        raise plugins.PluginError(unimplemented)
    _checked[kind] = found
    return found


@cache
def keys_of(kind: str) -> frozenset[str]:
    """The keys a target of `kind` takes: its spec model's fields and their aliases."""
    fields = target_class(kind).Spec.model_fields
    return frozenset({*fields, *(f.alias for f in fields.values() if f.alias)})


def foreign_key_owner(kind: str, key: str) -> str | None:
    """The other built-in target types a key belongs to (`grpc, livekit, pipecat and realtime`), when it is not
    a key of `kind` itself: every one, since naming the first alone sent a reader of `mode` to grpc. Reading
    another type's keys imports its module, which happens only for a key `kind` does not take; a type whose
    module cannot be imported here (an extra not installed) is passed over."""
    if key in keys_of(kind):
        return None
    owners = []
    for other in (t for t in plugins.built_in_names("targets") if t != kind):
        try:
            if key in keys_of(other):
                owners.append(other)
        except ImportError:
            continue  # its module needs an extra not installed here (numpy for the phone-like targets)
    return " and ".join(filter(None, [", ".join(owners[:-1]), *owners[-1:]])) or None
