"""What `--report junit:PATH,html,github` and `report:` in tamesu.yaml ask for, as a list of requests."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from tamesu import plugins
from tamesu.report.formats import UnknownReport, format_of, known


class ReportSpecError(ValueError):
    """A `--report` entry that names no known format, or a path where none is taken."""


@dataclass(frozen=True)
class ReportRequest:
    kind: str
    path: str | None = None
    """As written; `{run}` is replaced by the run directory's name. None: the default inside the run dir."""
    base: Path | None = None
    """The folder a relative path is read from: the current one for `--report`, tamesu.yaml's for `report:`."""

    def target(self, run_dir: Path) -> Path | None:
        """The file this report is written to; None for a format that takes none (`github` prints and appends
        to the job summary). A report goes inside the run directory when no path is given, beside the
        artifacts it links to."""
        default = format_of(self.kind).default_file
        if default is None:
            return None
        if self.path is None:
            return run_dir / default
        written = Path(self.path.replace("{run}", run_dir.name))
        if not written.is_absolute() and self.base is not None:
            written = self.base / written
        return written


def parse_reports(text: str | list[str], base: Path | None = None) -> list[ReportRequest]:
    """`junit:out/junit.xml,html,github` (or the same as a list) into requests, in the order written."""
    entries = text.split(",") if isinstance(text, str) else list(text)
    requests: list[ReportRequest] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        kind, sep, path = entry.partition(":")
        kind = kind.strip()
        try:
            takes_path = format_of(kind).default_file is not None
        except UnknownReport:
            # `jsn`: the format it is near first; the entry quoted only when it holds more than the name
            close = difflib.get_close_matches(kind.lower(), known(), n=1)
            near = f"did you mean {close[0]!r}? " if close else ""
            written = f" in {entry!r}" if entry != kind else ""
            raise ReportSpecError(f"unknown report {kind!r}{written} ({near}one of {', '.join(known())})") from None
        except plugins.PluginError as exc:
            raise ReportSpecError(str(exc)) from None
        path = path.strip()
        if kind == "github" and path:
            raise ReportSpecError("github takes no path: it prints annotations and writes $GITHUB_STEP_SUMMARY")
        if not takes_path and path:
            raise ReportSpecError(f"{kind} takes no path")
        if sep and not path and takes_path:
            raise ReportSpecError(f"{entry!r}: a path after the colon, or no colon for the default")
        requests.append(ReportRequest(kind, path or None, base))
    to_stdout = [f"{r.kind}:-" for r in requests if r.path == "-"]
    if len(to_stdout) > 1:
        # two files on one stream read as neither: `json:-,junit:-` was a JSON document with XML after it
        raise ReportSpecError(f"{' and '.join(to_stdout)}: one report at most goes to standard output (-)")
    _one_each(requests)
    return requests


def _one_each(requests: list[ReportRequest]) -> None:
    """Two requests for one destination are refused: `html,html` wrote the same report twice, and
    `json:r.out,junit:r.out` left only the second."""
    seen: dict[tuple[str, str], str] = {}
    for request in requests:
        written = f"{request.kind}:{request.path}" if request.path else request.kind
        default = format_of(request.kind).default_file
        if request.path == "-":
            continue  # said above: one at most
        if default is None:
            key, where = ("kind", request.kind), ""
        elif request.path is None:
            key, where = ("default", default), f"{default} in the run folder"
        else:
            path = Path(request.path)
            full = os.path.normpath(request.base / path if request.base and not path.is_absolute() else path)
            key, where = ("path", full), request.path
        if key in seen:
            said = f"both write {where}" if where else "named twice"
            raise ReportSpecError(f"{seen[key]} and {written}: {said}; name each report once")
        seen[key] = written
