"""Where a run's directory goes and how tests are named on disk; shared by the engine and by `tamesu merge`."""

from __future__ import annotations

import datetime as dt
import functools
import re
import secrets as random
import unicodedata
from pathlib import Path

_KEPT_CATEGORIES = ("L", "N", "M")
"""What a folder name keeps of a test's name: letters, digits and marks of any script (the vowel signs of Hindi
or Thai are marks), and `_`, `.`, `-`; every run of anything else is one `-`. Only ASCII was kept before, so
tests named in Japanese, Chinese, Russian or Hindi were folders `test`, `test-2`, `test-3`... and `Réservation`
was `R-servation`."""
_NAME_BYTES = 200
"""A folder name's UTF-8 bytes at most: file systems allow 255, and a test's name may be longer than that
in a script of 3 bytes a letter (80 characters of Japanese were 240 bytes)."""


@functools.lru_cache(maxsize=1024)  # a suite's name is made a folder's for every test of it
def slug(text: str, limit: int = 80) -> str:
    # NFC: a name typed on macOS (decomposed é) and on Linux (composed) is one folder
    kept = [c if c in "_.-" or unicodedata.category(c)[0] in _KEPT_CATEGORIES else " "
            for c in unicodedata.normalize("NFC", text)]
    cleaned = "-".join("".join(kept).split()).strip("-._") or "test"
    cut = cleaned[:limit]
    while len(cut.encode("utf-8")) > _NAME_BYTES:
        cut = cut[:-1]
    return cut


_STAMPED = re.compile(r"^(\d{8}-\d{6}-\d{3})-")
_STAMP_FORMAT = "%Y%m%d-%H%M%S"


def _stamp(moment: dt.datetime) -> str:
    return f"{moment:{_STAMP_FORMAT}}-{moment.microsecond // 1000:03d}"


def _newest_stamp(out: Path) -> dt.datetime | None:
    stamps = [m.group(1) for p in out.iterdir() if (m := _STAMPED.match(p.name))] if out.is_dir() else []
    if not stamps:
        return None
    newest = max(stamps)
    return dt.datetime.strptime(newest[:15], _STAMP_FORMAT) + dt.timedelta(milliseconds=int(newest[16:]))


def new_run_dir(out: Path) -> Path:
    """A new folder named by its start time; a later run always sorts after an earlier one (`newest` is by name),
    even when both start within one millisecond or the clock stepped back."""
    moment = dt.datetime.now()
    newest = _newest_stamp(out)
    if newest is not None and newest >= moment.replace(microsecond=moment.microsecond // 1000 * 1000):
        moment = newest + dt.timedelta(milliseconds=1)
    for _ in range(100):
        path = out / f"{_stamp(moment)}-{random.token_hex(2)}"
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            moment += dt.timedelta(milliseconds=1)
    raise FileExistsError(f"{out}: no free run directory name")
