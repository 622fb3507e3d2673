"""A browser test's steps in the HTML report: each step's screenshot inline (the page's CSP allows only
`data:` images, so the report stays one file with no network), and the browser agent's actions of a goal."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

MAX_IMAGE_BYTES = 2_000_000
"""A larger screenshot (a full page) is linked, not inlined, so the report stays small enough to open."""


def _image(folder: Path, relative: str | None, alt: str, css: str) -> str:
    if not relative:
        return ""
    path = folder / relative
    try:
        data = path.read_bytes()
    except OSError:
        return f'<p class="dim">screenshot {escape(relative)} is missing</p>'
    if len(data) > MAX_IMAGE_BYTES:
        return f'<p class="dim">screenshot {escape(relative)} ({len(data) // 1000} kB) is in the run folder</p>'
    encoded = base64.b64encode(data).decode()
    kind = "jpeg" if relative.endswith((".jpg", ".jpeg")) else "png"
    return f'<img class="{css}" alt="{escape(alt, quote=True)}" src="data:image/{kind};base64,{encoded}">'


def step_html(record: object, folder: Path) -> str:
    """The screenshot after one step and, for a goal, each agent action with its own; the page after a chat
    widget's turn; "" for other turns."""
    if not isinstance(record, dict):
        return ""
    if "step" not in record or "kind" not in record:  # a chat turn: its page, answered or not
        return _image(folder, record.get("screenshot"), "the page after this turn", "step-shot") \
            if isinstance(record.get("screenshot"), str) else ""
    parts = []
    agent_steps = record.get("agent_steps") or []
    if agent_steps:
        items = []
        for step in agent_steps:
            mark = "✓" if step.get("ok") else "✗"
            shot = _image(folder, step.get("screenshot"), f"after agent step {step.get('number')}", "agent-shot")
            items.append(f"<li>{mark} <code>{escape(str(step.get('action')))}</code> "
                         f"{escape(str(step.get('outcome', ''))[:200])}{shot}</li>")
        parts.append(f'<ol class="agent-steps">{"".join(items)}</ol>')
    parts.append(_image(folder, record.get("screenshot"), f"the page after step {record['step']}", "step-shot"))
    return "".join(parts)
