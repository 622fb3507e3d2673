"""The files a run kept beyond its result and transcript (a browser's trace.zip and network.har, a visual check's
screenshot and diff, an MCP server's log), for the HTML report to link: a failure's evidence one click away, not
a folder to search."""

from __future__ import annotations

import os
from pathlib import Path

SHOWN = frozenset({"result.json", "transcript.json", "audio.wav"})
"""Linked or played by the report already."""
INLINE = frozenset({"steps"})
"""A browser run's step screenshots: shown in the page itself."""
LIMIT = 20
"""Links per run; the folder's link leads to the rest."""


def other_files(folder: Path) -> tuple[list[Path], int]:
    """Up to LIMIT of the run folder's other files, by path, and how many there are in all."""
    found: list[Path] = []
    _walk(folder, found, top=True)
    return found[:LIMIT], len(found)


def _walk(folder: Path, found: list[Path], top: bool) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if not (top and entry.name in INLINE):
                _walk(Path(entry.path), found, top=False)
        elif not (top and entry.name in SHOWN) and not entry.name.endswith(".tmp"):
            found.append(Path(entry.path))
