"""Report formats: one line each, the function that writes it and the file it goes to by default.

A writer is `write(run: LoadedRun, path: Path | None, comparison: Comparison | None) -> None`; `path` is None
for a format that takes no file (`github` prints annotations). Plug-ins add formats through the
`tamesu.reports` entry points: a `ReportFormat`, or a bare writer function (its file is `report.NAME` unless
the function has a `default_file` attribute). Only this table and the writer's own module know a format.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tamesu import plugins


@dataclass(frozen=True)
class ReportFormat:
    name: str
    writer: str | Callable[..., Any]
    """`module:function`, imported when the report is written, or the function itself (a plug-in's)."""
    default_file: str | None
    """Its file inside the run directory when no path is given; None: the format takes no path."""

    def write_function(self) -> Callable[..., Any]:
        if callable(self.writer):
            return self.writer
        module_name, _, attribute = self.writer.partition(":")
        return getattr(importlib.import_module(module_name), attribute)


_BUILT_IN = {f.name: f for f in [
    ReportFormat("junit", "tamesu.report.junit:write_report", "junit.xml"),
    ReportFormat("html", "tamesu.report.html:write_html", "report.html"),
    ReportFormat("json", "tamesu.report.json_report:write_json_report", "report.json"),
    ReportFormat("markdown", "tamesu.report.markdown:write_markdown", "summary.md"),
    ReportFormat("github", "tamesu.report.github:write_report", None),
]}


BUILT_IN_NAMES = frozenset(_BUILT_IN)


class UnknownReport(KeyError):
    pass


def format_of(name: str) -> ReportFormat:
    """The built-in or plug-in format `name`; raises UnknownReport, or PluginError for a broken plug-in."""
    if name in _BUILT_IN:
        return _BUILT_IN[name]
    if not plugins.has("reports", name):
        raise UnknownReport(name)
    found = plugins.load("reports", name)
    if isinstance(found, ReportFormat):
        return found
    if callable(found):
        return ReportFormat(name, found, getattr(found, "default_file", f"report.{name}"))
    raise plugins.PluginError(f"plug-in tamesu.reports:{name} is neither a ReportFormat nor a function")


def known() -> list[str]:
    return [*_BUILT_IN, *(n for n in plugins.names("reports") if n not in _BUILT_IN)]
