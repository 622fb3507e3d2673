"""The files a user turn sends, named as a test writes them: a local path (looked for in a list of folders) or a
URL the agent fetches."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from tamesu.conversation import FileRef


def file_path(source: str, dirs: Path | list[Path]) -> Path | None:
    """The local file a `file://` source (or a bare path) names, or None for a URL. A relative path is looked
    for in each of `dirs` in turn (the JSONL file's folder, then the project's): the first that has the file
    wins; when none has it, the path under the first (so the problem names where it was expected)."""
    if source.startswith("file://"):
        source = source.removeprefix("file://")
    elif "://" in source:
        return None
    folders = [dirs] if isinstance(dirs, Path) else dirs
    candidates = [folder / source for folder in folders]
    return next((c for c in candidates if is_file(c)), candidates[0])


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name longer than the system allows, a NUL byte
        return False


def sent_file(source: str, name: str | None, mime: str | None, dirs: Path | list[Path]) -> FileRef:
    """The file as a user turn carries it: a local path, or a URI the agent fetches; the name from the source
    and the type from the name when not given."""
    path = file_path(source, dirs)
    name = name or Path(source.split("?", 1)[0]).name or "file"
    mime = mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return FileRef(name=name, mime=mime, path=str(path.resolve()) if path else None,
                   uri=None if path else source)
