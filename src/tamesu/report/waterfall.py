"""A turn's waterfall: tamesu's turn on top, the agent's spans below it nested by parent, each a bar placed on
the turn's clock, its attributes on hover. HTML and CSS only (rows stay readable on a phone, where SVG text
would shrink); the HTML report draws one under each agent turn that has spans (`traces:`), and `tamesu view`
draws the same from the results store, which keeps each turn's `TurnSpans` (what is drawn, bounded)."""

from __future__ import annotations

import json
from html import escape
from importlib import resources

from pydantic import BaseModel, Field

from tamesu.telemetry.genai import excerpt, nested
from tamesu.telemetry.spans import Span, SpansFile

MAX_ROWS = 200
"""Spans drawn per turn; the rest are counted under the waterfall (and not kept in the store)."""
BEFORE = 0
"""The waterfall of the spans no turn owns, drawn above the first turn (and kept in the store as turn "0"):
a handshake, a session set up when the agent connected (a conversation trace's spans before the first turn)."""


class TurnSpans(BaseModel):
    """What one turn's waterfall draws: the turn's spans in tree order (at most MAX_ROWS), and how many more."""

    latency_ms: float
    """tamesu's turn: from sending to the answer."""
    sent_unix_nano: int | None = None
    """When tamesu sent the turn, on the agent's clock (None: the waterfall starts at the first span)."""
    spans: list[Span] = Field(default_factory=list)
    more: int = 0
    """The turn's spans past MAX_ROWS: counted, not drawn."""
    failed: int = 0
    """The turn's spans with status error, drawn or not."""


def waterfall_css() -> str:
    return resources.files("tamesu.report").joinpath("html_assets", "waterfall.css").read_text(encoding="utf-8")


def turn_spans(index: int, latency_ms: float, spans: SpansFile) -> TurnSpans | None:
    """The turn's waterfall as data (`BEFORE`: the spans before the first turn), or None when no span of the
    agent's was matched to it."""
    mine = [s for s in spans.spans if (s.turn if s.turn is not None else BEFORE) == index]
    if not mine:
        return None
    ordered = [span for _, span in nested(mine)]
    return TurnSpans(latency_ms=latency_ms, sent_unix_nano=spans.turn_started_unix_nano.get(str(index)),
                     spans=ordered[:MAX_ROWS], more=max(0, len(ordered) - MAX_ROWS),
                     failed=sum(1 for s in mine if s.status == "error"))


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _hover(span: Span) -> str:
    lines = [span.name, f"{_ms(span.duration_ms)} · {span.kind} · status {span.status}"
             + (f": {span.status_message}" if span.status_message else "")]
    if span.service:
        lines.append(f"service {span.service}")
    for key, value in sorted(span.attributes.items()):
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key} = {excerpt(text, 300)}")  # cut with `…`: a bare cut kept a secret's head
    lines.extend(f"event {event.name}" for event in span.events[:10])
    return "\n".join(lines)


def _row(name: str, hover: str, left: float, width: float, ms: float, css: str, depth: int) -> str:
    return (f'<li class="wf-row {css}" title="{escape(hover)}" style="--depth:{depth}">'
            f'<span class="wf-name">{escape(name)}</span>'
            f'<span class="wf-track"><span class="wf-bar" style="left:{left:.2f}%;width:{max(width, 0.4):.2f}%">'
            f'</span></span><span class="wf-ms">{escape(_ms(ms))}</span></li>')


def waterfall(index: int, turn: TurnSpans) -> str:
    """The turn's waterfall as HTML (its CSS is `waterfall_css()`)."""
    mine = turn.spans
    if not mine:
        return ""
    origin = turn.sent_unix_nano if turn.sent_unix_nano is not None else min(s.start_unix_nano for s in mine)
    span_end = max((s.end_unix_nano - origin) / 1e6 for s in mine)
    total = max(turn.latency_ms, span_end, 0.001)
    # before the first turn tamesu sent nothing of a turn's: no turn of its own on top
    rows = [] if index == BEFORE else [
        _row(f"tamesu turn {index}", f"turn {index}: {_ms(turn.latency_ms)} from sending to the answer",
             0.0, 100 * turn.latency_ms / total, turn.latency_ms, "wf-turn", 0)]
    for depth, span in nested(mine):
        left = 100 * max(0.0, (span.start_unix_nano - origin) / 1e6) / total
        rows.append(_row(span.name, _hover(span), left, 100 * span.duration_ms / total, span.duration_ms,
                         f"wf-{span.status}", depth + 1))
    more = f'<p class="dim">{turn.more} more span(s) not drawn</p>' if turn.more else ""
    count = len(mine) + turn.more
    said = f"{count} agent span{'s' if count != 1 else ''}" + (f", {turn.failed} failed" if turn.failed else "")
    whose = "before the first turn" if index == BEFORE else f"of turn {index}"
    if index == BEFORE:
        said += f" {whose}"
    return (f'<details class="waterfall" open><summary>{escape(said)} · {escape(_ms(total))}</summary>'
            f'<ol class="wf" aria-label="spans {whose}">{"".join(rows)}</ol>{more}</details>')


def before_first_turn(spans: SpansFile) -> str:
    """The agent's spans no turn owns (its handshake, a session set up as it connected) as the report's bubble
    above the first turn, or nothing."""
    drawn = turn_spans(BEFORE, 0.0, spans)
    return "" if drawn is None else ('<div class="msg agent"><div class="who">agent · before the first turn</div>'
                                     f"{waterfall(BEFORE, drawn)}</div>")


def by_turn(latencies: dict[int, float], spans: SpansFile) -> dict[str, TurnSpans]:
    """Every turn's waterfall as data, by turn number (a JSON object's keys; "0": before the first turn): what
    the store keeps."""
    drawn = {index: turn_spans(index, latency, spans) for index, latency in {BEFORE: 0.0, **latencies}.items()}
    return {str(index): turn for index, turn in drawn.items() if turn is not None}
