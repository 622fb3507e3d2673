"""`tamesu test`: what the run writes (`-o`, `--report` paths) must not land on what it reads.

`-o a.jsonl` with `-i a.jsonl` used to replace the test cases with result records, before the first case ran;
a record file written into a folder given as `-i` is read as cases by the next run of that folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tamesu.plan.project import JSONL_SUFFIXES, jsonl_in_folder
from tamesu.plan.project import label as file_label

if TYPE_CHECKING:
    from tamesu.jsonl.sources import InputSource
    from tamesu.report.spec import ReportRequest


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)  # a hard link or a symlink to the input is the input
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


def _written(output: str | None, requests: list[ReportRequest]) -> list[tuple[str, Path]]:
    """(how the command line names it, the path) of every file the run writes outside its run folder."""
    from tamesu.report.emit import STDOUT

    paths = [("-o", Path(output))] if output else []
    for request in requests:
        # `{run}` is a fresh run folder's name: it cannot be a file that exists already
        if request.path is None or request.path == STDOUT or "{run}" in request.path:
            continue
        target = request.target(Path("."))
        if target is not None:
            paths.append((f"--report {request.kind}:{request.path}", target))
    return paths


def check_outputs(source: InputSource, output: str | None,
                  requests: list[ReportRequest]) -> tuple[str | None, list[str]]:
    """(why the run is refused, or None; warnings)."""
    if source.kind == "file":
        inputs, folder = [Path(source.value)], None
    elif source.kind == "folder":
        folder = Path(source.value)
        try:
            inputs = jsonl_in_folder(folder)
        except OSError:
            return None, []  # an unreadable folder is said by the loader, where it is read
    else:
        return None, []
    warnings: list[str] = []
    for flag, path in _written(output, requests):
        for read in inputs:
            if _same(path, read):
                shown = flag if flag.startswith("--report") else f"{flag} {path}"
                return (f"{shown} is the input file {file_label(read)}: writing it would replace the test "
                        "cases; write elsewhere"), []
        if folder is not None and path.name.lower().endswith(JSONL_SUFFIXES) and _same(path.parent, folder):
            shown = flag if flag.startswith("--report") else f"{flag} {path}"
            warnings.append(f"{shown} is written in the input folder {file_label(folder)}: the next "
                            f"`tamesu test -i {source.text}` will read it as test cases")
    return None, warnings
