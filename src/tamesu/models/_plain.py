"""Reading a provider's answer as the plain JSON it came as (the SDKs' typed models cost a tenth of a call to
build): a field of the wrong type reads as missing, never as an exception from deep inside a run."""

from __future__ import annotations

from typing import Any


def mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def count(value: object) -> int:
    """A token count: a non-negative int, else 0 (a bool is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
