"""Positions in JSON text, and keys written twice.

Python's json module gives positions only for syntax errors, so a value's position is found again by walking
the (already valid) text along the path with the decoder's own scanner: keys with `scanstring`, skipped
values with `raw_decode`. It also keeps the last of a key written twice, in silence: `DECODER` refuses one
(`DuplicateKey`), and `duplicates` finds where each is written.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since 2.6, not in typeshed
from typing import Any

_PLAIN = json.JSONDecoder()
_SPACE = " \t\r\n"


class DuplicateKey(ValueError):
    """A JSON object holds one key twice (the user meant one of them, not the last one)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        raise DuplicateKey("a key written twice")
    return made


DECODER = json.JSONDecoder(object_pairs_hook=_pairs)
"""json's decoder, raising DuplicateKey for an object that holds a key twice."""


def skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def _member(text: str, pos: int, name: str) -> tuple[int, int] | None:
    """(key offset, value offset) of `name` in the object at `pos`."""
    pos = skip(text, pos + 1)
    while pos < len(text) and text[pos] == '"':
        key_at = pos
        key, pos = scanstring(text, pos + 1)
        pos = skip(text, skip(text, pos) + 1)  # past the colon
        if key == name:
            return key_at, pos
        _, pos = _PLAIN.raw_decode(text, pos)
        pos = skip(text, pos)
        if pos >= len(text) or text[pos] != ",":
            return None
        pos = skip(text, pos + 1)
    return None


def starts(text: str, pos: int) -> Iterator[int]:
    """Where each value of the (valid) JSON array at `pos` starts, in one pass."""
    pos = skip(text, pos + 1)
    while pos < len(text) and text[pos] != "]":
        yield pos
        pos = skip(text, _PLAIN.raw_decode(text, pos)[1])
        if pos >= len(text) or text[pos] != ",":
            return
        pos = skip(text, pos + 1)


def locate(text: str, start: int, loc: Sequence[object], *, key: bool = False) -> int:
    """The offset of the value at `loc` in the JSON value starting at `start` (of its key when `key`), or of
    the nearest parent that exists."""
    pos = skip(text, start)
    try:
        for depth, part in enumerate(loc):
            last = depth == len(loc) - 1
            if text[pos] == "{" and isinstance(part, str):
                found = _member(text, pos, part)
                if found is None:
                    return pos
                pos = found[0] if last and key else found[1]
            elif text[pos] == "[" and isinstance(part, int):
                item = next(itertools.islice(starts(text, pos), part, None), None)
                if item is None:
                    return pos
                pos = item
            else:
                return pos
    except (IndexError, ValueError):
        return pos
    return pos


def end_of(text: str, pos: int) -> int:
    """Where the JSON value at `pos` (one DECODER refused for a key written twice) ends."""
    return int(_PLAIN.raw_decode(text, pos)[1])


Written = tuple[int, tuple[str | int, ...], str]
"""Where a key is written the second time: its offset, the path of its object, and the key."""


def duplicates(text: str, start: int, limit: int = 20) -> list[Written]:
    """The keys written twice in the (otherwise valid) JSON value at `start`, at most `limit`, in the order
    written; `[(start, (), "")]` when the value is nested past what a walk can follow."""
    found: list[Written] = []
    try:
        _walk(text, skip(text, start), (), found, limit)
    except (RecursionError, ValueError, IndexError):
        return found or [(start, (), "")]
    return found


def _walk(text: str, pos: int, path: tuple[str | int, ...], found: list[Written], limit: int) -> None:
    if len(found) >= limit:
        return
    if text.startswith("{", pos):
        seen: set[str] = set()
        pos = skip(text, pos + 1)
        while text.startswith('"', pos):
            key_at = pos
            key, pos = scanstring(text, pos + 1)
            if key in seen and len(found) < limit:
                found.append((key_at, path, key))
            seen.add(key)
            pos = skip(text, skip(text, pos) + 1)  # past the colon
            _walk(text, pos, (*path, key), found, limit)
            pos = skip(text, end_of(text, pos))
            if not text.startswith(",", pos):
                return
            pos = skip(text, pos + 1)
    elif text.startswith("[", pos):
        for index, item in enumerate(starts(text, pos)):
            _walk(text, item, (*path, index), found, limit)
