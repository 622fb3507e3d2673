"""Report formats: a writer function marked `@register("reports", NAME, default_file=...)` in its own module
(see `tamesu.plugins`), imported when its report is written.

A writer is `write(run: LoadedRun, path: Path | None, comparison: Comparison | None) -> None`; `path` is None
for a format that takes no file (`github` prints annotations). A report bound for standard output is written in
a temporary folder first: a writer whose report links to the run's files takes a `links_from` keyword, the folder
its links start from (the run folder, as for its own file). Plug-ins add formats through the
`tamesu.reports` entry points: a `ReportFormat`, or a bare writer function (its file is `report.NAME` unless
the function has a `default_file` attribute). Only the writer's own module knows a format.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tamesu import plugins


@dataclass(frozen=True)
class ReportFormat:
    name: str
    writer: str | Callable[..., object]
    """`module:function`, imported when the report is written, or the function itself (a plug-in's)."""
    default_file: str | None
    """Its file inside the run directory when no path is given; None: the format takes no path."""

    def write_function(self) -> Callable[..., object]:
        if callable(self.writer):
            return self.writer
        module_name, _, attribute = self.writer.partition(":")
        function: Callable[..., Any] = getattr(importlib.import_module(module_name), attribute)
        return function


class UnknownReport(KeyError):
    pass


def format_of(name: str) -> ReportFormat:
    """The built-in or plug-in format `name`; raises UnknownReport, or PluginError for a broken plug-in."""
    if not plugins.has("reports", name):
        raise UnknownReport(name)
    found = plugins.load("reports", name)
    if isinstance(found, ReportFormat):
        return found
    if callable(found):
        _takes_three(name, found)
        return ReportFormat(name, found, getattr(found, "default_file", f"report.{name}"))
    raise plugins.PluginError(f"plug-in tamesu.reports:{name} is neither a ReportFormat nor a function")


def _takes_three(name: str, writer: Callable[..., object]) -> None:
    """A writer that cannot take (run, path, comparison) is said before the run, not after all of it."""
    try:
        signature = inspect.signature(writer)
    except (TypeError, ValueError):
        return  # no readable signature (a C function): found out when it is called
    try:
        signature.bind(None, None, None)
    except TypeError as exc:
        plain = signature.replace(
            parameters=[p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()],
            return_annotation=inspect.Signature.empty)
        called = getattr(writer, "__name__", "")
        raise plugins.PluginError(f"plug-in tamesu.reports:{name}: its writer {called}{plain} cannot be called with "
                                  f"(run, path, comparison): {exc}") from None


def known() -> list[str]:
    built_in = plugins.built_in_names("reports")
    return [*built_in, *(n for n in plugins.names("reports") if n not in built_in)]


def is_built_in(name: str) -> bool:
    return plugins.is_built_in("reports", name)
