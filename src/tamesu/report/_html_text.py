"""Text as the HTML report and its charts write it: escaped only when it needs to be, durations, numbers, clipped
values."""

from __future__ import annotations

import json
import re
from html import escape

SPECIAL = re.compile(r"[&<>\"']")
"""What `html.escape(quote=True)` replaces; a text without any (most of a page's) is its own escape: one search
instead of escape's five replaces, for every cell, link, line and chart title of the page."""


def escape_text(text: str) -> str:
    return escape(text, quote=True) if SPECIAL.search(text) else text


def esc(value: object) -> str:
    text = value if type(value) is str else str(value)  # a str subclass (an enum) says what str() says
    return escape(text, quote=True) if SPECIAL.search(text) else text


def ms(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"


def num(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def short(value: object, limit: int = 300) -> str:
    return clip(text_of(value), limit)


def text_of(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
