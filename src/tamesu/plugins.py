"""Plug-ins: what third-party packages add through Python entry points, one group per kind.

- `tamesu.targets`: a `Target` class with its `Spec` model; a suite uses it as `type: NAME` under `targets:`.
- `tamesu.checks`: a `Check` class (a new key under `assert:`), or a function `(run, **with) -> verdict` that
  `custom: {name: NAME, with: {...}}` runs (a class is usable there too).
- `tamesu.providers`: a model `Provider` class (`from_spec(spec, http, base_dir=...)`); `provider: NAME`.
- `tamesu.reports`: a `report.formats.ReportFormat`, or a writer `(run, path, comparison) -> None`;
  `--report NAME[:PATH]`.
- `tamesu.evaluators`: `name -> callable or class`, a scored evaluator for `evaluator: NAME` (read here,
  loaded and checked by `tamesu.evaluators`).

Entry points are read once per process, and an entry point is imported only when a suite uses its name, so
installed plug-ins cost nothing at start-up. A built-in name wins over a plug-in's of the same name.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

Kind = Literal["targets", "checks", "providers", "reports", "evaluators"]
KINDS: tuple[Kind, ...] = ("targets", "checks", "providers", "reports", "evaluators")


class PluginError(Exception):
    """An entry point that cannot be imported, or that names something of the wrong shape."""


def group(kind: Kind) -> str:
    return f"tamesu.{kind}"


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


def names(kind: Kind) -> list[str]:
    """The names plug-ins register for `kind`, without importing them."""
    return sorted(entry_points_of(kind))


def has(kind: Kind, name: str) -> bool:
    return name in entry_points_of(kind)


def load(kind: Kind, name: str) -> Any:
    """The object a plug-in registers as `name`; raises KeyError when none does, PluginError when it fails."""
    return _load(entry_points_of(kind)[name], kind)


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
