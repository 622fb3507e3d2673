"""The one lookup path for what a suite names: targets, checks, model providers, reports and evaluators.

Two ways in, one registry:

- `@register(kind, name)` on a class or function (or `X = register(kind, name)(obj)` for an object) in a
  module. tamesu's own built-ins are registered this way, each in its own module and nowhere else: the
  module is found by reading the source of its kind's package (`targets/`, `checks/`, `models/`, `report/`,
  `evaluators/`) for those lines, without importing it, and imported only when a suite names it. A module
  anyone imports registers its names the same way (a test's, a project's conftest).
- an entry point in the group `tamesu.KIND` of an installed package (see docs/plugins.md): read once per
  `sys.path`, imported only when a suite uses its name, so installed plug-ins cost nothing at start-up.

What each kind's object is (a `Target` class with its `Spec`, a `Check` class or a function, a `Provider`
class whose `from_spec(spec, api_key, *, base_dir=None)` is written once on `tamesu.models.base.Provider`, a
report writer or `ReportFormat`, an evaluator) is checked by the kind's own package. A built-in name wins over
a plug-in's of the same name.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Literal, TypeVar

Kind = Literal["targets", "checks", "providers", "reports", "evaluators"]
KINDS: tuple[Kind, ...] = ("targets", "checks", "providers", "reports", "evaluators")

T = TypeVar("T")

_HOME: dict[Kind, str] = {"targets": "targets", "checks": "checks", "providers": "models",
                          "reports": "report", "evaluators": "evaluators"}
"""The package of tamesu whose modules hold the built-ins of each kind."""

_PACKAGE = Path(__file__).resolve().parent

# `@register("checks", "contains")` above `class Contains`, or `FAITHFULNESS = register("evaluators", ...)(`, on
# one line with the kind and the name as string literals, so that they can be read without importing the module
_CALL = r"""(?:plugins\.)?register\(\s*["'](?P<kind>\w+)["']\s*,\s*["'](?P<name>[^"']+)["']"""
_MARK = re.compile(rf"(?:@|\w+\s*(?::[^=]+)?=\s*){_CALL}")


class PluginError(Exception):
    """An entry point that cannot be imported, or that names something of the wrong shape."""


def unimplemented(kind: Kind, name: str, found: type) -> str | None:
    """What a plug-in class leaves abstract, said as one line (`plug-in tamesu.targets:X does not implement send`);
    None when it implements everything (else every use was "Can't instantiate abstract class", an internal error)."""
    if not inspect.isabstract(found):
        return None
    missing = ", ".join(sorted(getattr(found, "__abstractmethods__", ())))
    return f"plug-in {group(kind)}:{name} does not implement {missing}"


def group(kind: Kind) -> str:
    return f"tamesu.{kind}"


_registered: dict[Kind, dict[str, object]] = {kind: {} for kind in KINDS}


def register(kind: Kind, name: str, **attributes: object) -> Callable[[T], T]:
    """Registers the decorated object as `name` of `kind` when its module is imported. `attributes` are set
    on it (a report writer's `default_file`). The object is returned unchanged."""
    if kind not in KINDS:
        raise ValueError(f"no plug-in kind {kind!r} (kinds: {', '.join(KINDS)})")
    caller = sys._getframe(1).f_globals.get("__name__", "?")  # the module whose line registers it
    home = _built_in(kind).get(name)
    if home is not None and caller != home:
        raise PluginError(f"{group(kind)}:{name} is tamesu's own ({home}); {caller} cannot register it")

    def mark(obj: T) -> T:
        for key, value in attributes.items():
            setattr(obj, key, value)
        taken = _registered[kind].get(name)
        if taken is not None and _where(taken) != _where(obj):
            raise PluginError(f"{group(kind)}:{name} is registered twice: by {_where(taken)} and {_where(obj)}")
        _registered[kind][name] = obj
        return obj

    return mark


def _where(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


@cache
def _built_in(kind: Kind) -> dict[str, str]:
    """name -> the module that registers it, read from the source of the kind's package."""
    found: dict[str, str] = {}
    home = _PACKAGE / _HOME[kind]
    for path in sorted(home.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "register(" not in text:
            continue
        module = ".".join(("tamesu", *path.relative_to(_PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        for line in text.splitlines():
            match = _MARK.match(line) if "register(" in line else None
            if match is not None and match["kind"] == kind:
                found.setdefault(match["name"], module)
    return found


@cache
def _read(kind: Kind, path: tuple[str, ...]) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=group(kind)):
        found.setdefault(point.name, point)  # the first distribution that claims a name keeps it
    return found


def entry_points_of(kind: Kind) -> dict[str, EntryPoint]:
    """The entry points of `kind`'s group by name, read once per `sys.path` (a folder added at run time, as
    tests do, is seen)."""
    return _read(kind, tuple(sys.path))


def built_in_names(kind: Kind) -> list[str]:
    """tamesu's own names of `kind`, in the order its package's files list them, without importing them."""
    return list(_built_in(kind))


def is_built_in(kind: Kind, name: str) -> bool:
    return name in _built_in(kind)


def names(kind: Kind) -> list[str]:
    """Every name of `kind`: built in, registered by an imported module, or an installed plug-in's; sorted,
    nothing imported."""
    return sorted({*_built_in(kind), *_registered[kind], *entry_points_of(kind)})


def has(kind: Kind, name: str) -> bool:
    return name in _built_in(kind) or name in _registered[kind] or name in entry_points_of(kind)


def load(kind: Kind, name: str) -> Any:
    """The object registered as `name`, imported now; raises KeyError when there is none, PluginError when
    it fails to load."""
    if name in _built_in(kind) and name not in _registered[kind]:
        importlib.import_module(_built_in(kind)[name])  # its `@register` line runs
        if name not in _registered[kind]:
            raise PluginError(f"{_built_in(kind)[name]} does not register {group(kind)}:{name} when imported")
    if name in _registered[kind]:
        return _registered[kind][name]
    return _load(entry_points_of(kind)[name], kind)


def origin(kind: Kind, name: str) -> str:
    """`built-in`, `plug-in <dist> <version>`, or `registered by <module>` (what a result records of where an
    evaluator came from)."""
    if name in _built_in(kind):
        return "built-in"
    if name in _registered[kind]:
        return f"registered by {getattr(_registered[kind][name], '__module__', '?')}"
    dist = entry_points_of(kind)[name].dist
    return f"plug-in {dist.name} {dist.version}" if dist is not None else "plug-in"


def reference(kind: Kind, name: str) -> str:
    """Where `name` is defined, as `module` or an entry point's `module:attribute`, without importing it."""
    if name in _built_in(kind):
        return _built_in(kind)[name]
    if name in _registered[kind]:
        return _where(_registered[kind][name])
    return entry_points_of(kind)[name].value


@cache
def _load(point: EntryPoint, kind: Kind) -> Any:
    try:
        return point.load()
    except Exception as exc:
        dist = point.dist.name if point.dist is not None else "an installed package"
        raise PluginError(f"plug-in {group(kind)}:{point.name} ({point.value}, from {dist}) cannot be loaded: "
                          f"{type(exc).__name__}: {exc}") from exc


def refresh() -> None:
    """Forget what was read, after packages were installed in this process without a change of sys.path."""
    _read.cache_clear()
    _load.cache_clear()


def _packages() -> dict[str, str]:
    """The top-level module of every installed plug-in's entry point -> how a message names its package; read
    from the entry points' values, nothing imported. (A module that registers names itself is the caller's
    own code, a test's or a conftest's: not told apart from tamesu's.)"""
    found: dict[str, str] = {}
    for kind in KINDS:
        for point in entry_points_of(kind).values():
            top = point.value.partition(":")[0].strip().split(".")[0]
            found.setdefault(top, f"plug-in {point.dist.name} {point.dist.version}" if point.dist is not None
                             else f"plug-in {group(kind)}:{point.name}")
    found.pop("tamesu", None)
    return found


def culprit(exc: BaseException) -> str | None:
    """The plug-in whose code an unexpected exception came through (innermost first), or None: then it is
    tamesu's own bug. What a plug-in let escape is its author's to fix, so the user is told whose it is."""
    import traceback

    packages = _packages()
    if not packages:
        return None
    for frame, _ in reversed(list(traceback.walk_tb(exc.__traceback__))):
        top = str(frame.f_globals.get("__name__", "")).split(".")[0]
        if top in packages:
            return packages[top]
    return None
