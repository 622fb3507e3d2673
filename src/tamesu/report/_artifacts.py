"""The files a run kept beyond its result and transcript (a browser's trace.zip and network.har, a visual check's
screenshot and diff, an MCP server's log), for the HTML report to link: a failure's evidence one click away, not
a folder to search."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SHOWN = frozenset({"result.json", "transcript.json", "audio.wav"})
"""Linked or played by the report already."""
INLINE = frozenset({"steps"})
"""A browser run's step screenshots: shown in the page itself."""
LIMIT = 20
"""Links per run; the folder's link leads to the rest."""


@dataclass
class RunFiles:
    kept: list[Path]
    """Up to LIMIT of the run folder's other files, by path."""
    count: int
    """How many other files there are in all."""
    top: set[str] = field(default_factory=set)
    """The names of the files directly in the folder (as `Path.is_file` sees them): the report asks whether
    audio.wav and spans.json are there from the listing it makes anyway, not with a system call each."""


def other_files(folder: Path) -> RunFiles:
    found: list[Path] = []
    files = RunFiles(found, 0)
    _walk(folder, found, files.top)
    files.kept, files.count = found[:LIMIT], len(found)
    return files


def _walk(folder: Path, found: list[Path], top: set[str] | None) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if not (top is not None and entry.name in INLINE):
                _walk(Path(entry.path), found, None)
            continue
        if top is not None:
            if entry.is_file():
                top.add(entry.name)
            if entry.name in SHOWN:
                continue
        if not entry.name.endswith(".tmp"):
            found.append(Path(entry.path))
