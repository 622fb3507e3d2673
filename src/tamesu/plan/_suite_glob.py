"""The files a `suites` pattern names: `Path.glob`, except that `**` never goes down into folders that hold no
suites and can hold very many files. A project's folder usually also holds its run folders (one more with every
run: thousands of files after a few hundred runs), `.git`, a virtual environment or `node_modules`, and the
default pattern `**/*.tamesu.yaml` walked all of them on every command."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePath

from tamesu.plan.model import PROJECT_FILE

NEVER_WALKED = frozenset({"node_modules", "__pycache__"})
"""Folder names `**` never enters, besides hidden folders (a leading dot: `.git`, `.venv`, `.tox`)."""

RUN_FOLDER_FILES = frozenset({"run.json", "results.jsonl"})
"""What every run folder holds (`tamesu run`, `tamesu test`): a folder with both is one, wherever `--out` put it."""

VENV_FILE = "pyvenv.cfg"
"""What every Python virtual environment holds at its root, whatever it is called."""


def suite_glob(folder: Path, pattern: str, skip: str | None = None) -> Iterator[Path]:
    """What `folder.glob(pattern)` yields, each path once, less what lies in the folders `**` does not enter:
    hidden ones, `node_modules`, `__pycache__`, virtual environments, run folders and `skip` (the project's
    `out`, an absolute path). A pattern's own words still reach them (`.suites/*.yaml`); errors are `Path.glob`'s."""
    seen: set[Path] = set()
    for path in _expand(folder, pattern, skip):
        if path not in seen:
            seen.add(path)
            yield path


def _expand(folder: Path, pattern: str, skip: str | None) -> Iterator[Path]:
    parts = PurePath(pattern).parts if pattern else ()
    if "**" not in parts or PurePath(pattern).is_absolute():
        yield from folder.glob(pattern)  # pathlib's own answer, and its errors for patterns it refuses
        return
    split = parts.index("**")
    head, tail = parts[:split], parts[split + 1:]
    bases = (p for p in folder.glob(str(PurePath(*head))) if p.is_dir()) if head else iter([folder])
    for base in bases:
        for directory in _walk(base, skip):
            if tail:
                yield from _expand(directory, str(PurePath(*tail)), skip)
            else:
                yield directory  # `**` last names folders, as in pathlib


def _walk(base: Path, skip: str | None) -> Iterator[Path]:
    """`base` and the folders below it, as `**` visits them (symlinked folders not followed), less the pruned. A
    folder below `base` with a tamesu.yaml of its own is another project: its suites are read with their own
    project file (its targets, models, vars), never with this one (they failed `validate` from above and passed
    from inside)."""
    for top, folders, files in os.walk(base):
        if VENV_FILE in files or RUN_FOLDER_FILES.issubset(files) or (PROJECT_FILE in files and top != str(base)):
            folders.clear()
            continue
        absolute = os.path.abspath(top)
        folders[:] = [name for name in folders if not (name.startswith(".") or name in NEVER_WALKED
                                                       or os.path.join(absolute, name) == skip)]
        yield Path(top)
