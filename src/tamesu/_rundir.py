"""Where a run's directory goes and how tests are named on disk; shared by the engine and by `tamesu merge`."""

from __future__ import annotations

import datetime as dt
import re
import secrets as random
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, limit: int = 80) -> str:
    cleaned = _UNSAFE.sub("-", text).strip("-._") or "test"
    return cleaned[:limit]


def new_run_dir(out: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = out / f"{stamp}-{random.token_hex(2)}"
    path.mkdir(parents=True, exist_ok=False)
    return path
