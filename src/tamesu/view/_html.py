"""The view's HTML, written as text: one layout, small tables and inline SVG charts (no script, no network)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from urllib.parse import quote

from tamesu.report.waterfall import waterfall_css

CSS = (Path(__file__).parent / "view.css").read_text(encoding="utf-8") + waterfall_css()
NAV = [("/", "Runs"), ("/tests", "Tests"), ("/compare", "Compare"), ("/drift", "Judge drift")]


def esc(value: object) -> str:
    return escape("" if value is None else str(value))


def link(path: str, text: str, **query: str) -> str:
    href = path + ("?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items()) if query else "")
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def test_link(test_id: str) -> str:
    return link("/test", test_id, id=test_id)


def run_link(run_id: str) -> str:
    return link("/run", run_id, id=run_id)


def page(title: str, body: str, active: str = "") -> str:
    nav = " ".join(f'<a href="{href}"{" class=on" if href == active else ""}>{esc(text)}</a>' for href, text in NAV)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)} · tamesu view</title><style>{CSS}</style></head>"
            f"<body><header><b>tamesu view</b>{nav}</header><main><h1>{esc(title)}</h1>{body}</main></body></html>")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str = "nothing yet") -> str:
    """Cells are HTML already (escape them before)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="dim">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def status(value: str) -> str:
    return f'<span class="{esc(value)}">{esc(value)}</span>'


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def chat(lines: Sequence[dict[str, object]], after_agent: Mapping[str, str] | None = None) -> str:
    """The transcript; `after_agent` is HTML by turn number (as a string) put under that turn's agent line ("0"
    above the first turn)."""
    if not lines:
        return '<p class="dim">no transcript</p>'
    said = "".join(f'<p class="{esc(line.get("role"))}"><b>{esc(line.get("role"))}:</b> {esc(line.get("text"))}</p>'
                   + ((after_agent or {}).get(str(line.get("turn")), "") if line.get("role") == "agent" else "")
                   for line in lines)
    # turn "0": what came before the first turn (the agent's spans of its handshake), above it
    before = (after_agent or {}).get("0", "")
    return f'<div class="chat">{before}{said}</div>'
