"""Half a UTF-16 pair written as an escape (`"\\udc00"`): JSON and YAML read it as a character of its own, which no
file, console or agent can take (UTF-8 has no such character), so a run that met one ended in an internal error.
Found where it is written, by the files' readers."""

from __future__ import annotations

import re
from typing import Any

LONE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<![89abAB][0-9a-fA-F]{2})"
                         r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
"""An escape of half a pair with no other half beside it (a whole pair, `\\ud83d\\ude00`, is its character)."""

PROBLEM = "is half of a UTF-16 pair without its other half: write the character itself"


def holds_half(value: Any) -> bool:
    """Whether any string (or key) in a JSON-like value holds a lone surrogate."""
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, dict):
        return any(holds_half(k) or holds_half(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_half(item) for item in value)
    return False
