"""A test leaves nothing in the repository's examples and fixtures: what a run writes beside a project it was
pointed at (a `.tamesu/store.db` beside the example's tamesu.yaml) is git-ignored there, so no `git status` shows
it, and the next run of the same tests reads it back (a history, a cache) as if the checkout held it.

The session notes every file under these folders when it starts and fails when it ends if any file is new: one
walk of some 160 files each time, cheap enough to run on every session."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WATCHED = (ROOT / "examples", ROOT / "tests" / "fixtures")
"""Projects the tests run tamesu against in place, where a run's own files would land."""


def files_under(roots: Iterable[Path] = WATCHED) -> set[Path]:
    """Every file (and symlink) under `roots`; compiled modules aside, which Python writes on import wherever the
    environment lets it and which nothing reads as data."""
    found: set[Path] = set()
    for root in roots:
        for path in root.rglob("*"):
            if "__pycache__" not in path.parts and (path.is_file() or path.is_symlink()):
                found.add(path)
    return found


def left_behind(before: set[Path], roots: Iterable[Path] = WATCHED) -> list[str]:
    """The files under `roots` that were not there `before`, as paths from the repository's root when below it."""
    new = files_under(roots) - before
    return sorted(str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path) for path in new)
