"""A turn's waterfall: tamesu's turn on top, the agent's spans below it nested by parent, each a bar placed on
the turn's clock, its attributes on hover. HTML and CSS only (rows stay readable on a phone, where SVG text
would shrink); the HTML report draws one under each agent turn that has spans (`traces:`)."""

from __future__ import annotations

import json
from html import escape

from tamesu.conversation import AgentTurn
from tamesu.telemetry.genai import nested
from tamesu.telemetry.spans import Span, SpansFile

_MAX_ROWS = 200
"""Spans drawn per turn; the rest are counted under the waterfall."""


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _hover(span: Span) -> str:
    lines = [span.name, f"{_ms(span.duration_ms)} · {span.kind} · status {span.status}"
             + (f": {span.status_message}" if span.status_message else "")]
    if span.service:
        lines.append(f"service {span.service}")
    for key, value in sorted(span.attributes.items()):
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key} = {text[:300]}")
    lines.extend(f"event {event.name}" for event in span.events[:10])
    return "\n".join(lines)


def _row(name: str, hover: str, left: float, width: float, ms: float, css: str, depth: int) -> str:
    return (f'<li class="wf-row {css}" title="{escape(hover)}" style="--depth:{depth}">'
            f'<span class="wf-name">{escape(name)}</span>'
            f'<span class="wf-track"><span class="wf-bar" style="left:{left:.2f}%;width:{max(width, 0.4):.2f}%">'
            f'</span></span><span class="wf-ms">{escape(_ms(ms))}</span></li>')


def waterfall(index: int, agent: AgentTurn, spans: SpansFile) -> str:
    """The turn's waterfall, or "" when no span of the agent's was matched to it."""
    mine = [s for s in spans.spans if s.turn == index]
    if not mine:
        return ""
    sent = spans.turn_started_unix_nano.get(str(index))
    origin = sent if sent is not None else min(s.start_unix_nano for s in mine)
    span_end = max((s.end_unix_nano - origin) / 1e6 for s in mine)
    total = max(agent.latency_ms, span_end, 0.001)
    rows = [_row(f"tamesu turn {index}", f"turn {index}: {_ms(agent.latency_ms)} from sending to the answer",
                 0.0, 100 * agent.latency_ms / total, agent.latency_ms, "wf-turn", 0)]
    ordered = nested(mine)
    for depth, span in ordered[:_MAX_ROWS]:
        left = 100 * max(0.0, (span.start_unix_nano - origin) / 1e6) / total
        rows.append(_row(span.name, _hover(span), left, 100 * span.duration_ms / total, span.duration_ms,
                         f"wf-{span.status}", depth + 1))
    more = f'<p class="dim">{len(ordered) - _MAX_ROWS} more span(s) not drawn</p>' if len(ordered) > _MAX_ROWS else ""
    errors = sum(1 for s in mine if s.status == "error")
    said = f"{len(mine)} agent span{'s' if len(mine) != 1 else ''}" + (f", {errors} failed" if errors else "")
    return (f'<details class="waterfall" open><summary>{escape(said)} · {escape(_ms(total))}</summary>'
            f'<ol class="wf" aria-label="spans of turn {index}">{"".join(rows)}</ol>{more}</details>')

