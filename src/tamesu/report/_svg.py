"""Small inline SVG charts for the HTML report: drawn here as text, so the report needs no script library.

Every chart scales to its container (a viewBox and width 100%) and takes its colours from CSS classes, so one
stylesheet serves the screen, a phone and paper. Every mark carries a <title>, the tooltip and the text a
screen reader reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tamesu.report._html_text import escape_text as escape


def _fmt(value: float) -> str:
    # the comparisons rather than abs(): one call fewer for every number a chart shows (NaN still reads ".3g")
    return f"{value:.0f}" if value >= 100 or value <= -100 else f"{value:.3g}"


def _svg(width: int, height: int, label: str, body: list[str], css: str, stretch: bool = False) -> str:
    # no xmlns: inline <svg> in HTML needs none, and the report then holds no http URL at all.
    # `stretch` for the status bar only: the others keep their proportions so their dots stay round.
    fit = ' preserveAspectRatio="none"' if stretch else ""
    return (f'<svg class="chart {css}" viewBox="0 0 {width} {height}"{fit} role="img" '
            f'aria-label="{escape(label)}"><title>{escape(label)}</title>{"".join(body)}</svg>')


def status_bar(counts: dict[str, int]) -> str:
    """One horizontal bar split by status: the whole run at a glance."""
    order = ["passed", "failed", "error", "inconclusive", "quarantined", "skipped"]
    total = sum(counts.get(s, 0) for s in order)
    if total == 0:
        return ""
    body, x = [], 0.0
    for status in order:
        n = counts.get(status, 0)
        if not n:
            continue
        width = 1000 * n / total
        body.append(f'<rect class="s-{status}" x="{x:.2f}" y="0" width="{width:.2f}" height="24">'
                    f"<title>{n} {status}</title></rect>")
        x += width
    return _svg(1000, 24, "tests by status", body, "statusbar", stretch=True)


@dataclass
class Bar:
    label: str
    value: float
    inner: float | None = None
    """A second value drawn inside the bar (time to first token inside the turn latency)."""
    failed: bool = False


def bars(items: Sequence[Bar], label: str, unit: str = "ms") -> str:
    """Vertical bars, one per item (a turn), a fixed width each: one turn is one slim bar, not a wall.

    No text inside: SVG text shrinks with the chart on a phone, so the scale goes in the HTML caption."""
    if not items:
        return ""
    top = max(max(b.value, b.inner or 0) for b in items) or 1.0
    step, height, gap = 24, 80, 6
    width = step * len(items)
    body = [f'<line class="axis" x1="0" y1="{height}" x2="{width}" y2="{height}"/>']
    for i, item in enumerate(items):
        x = i * step + gap / 2
        w = step - gap
        h = max(item.value / top * (height - 2), 1)
        css = "bar bad" if item.failed else "bar"
        tip = f"{item.label}: {_fmt(item.value)} {unit}"
        if item.inner is not None:
            tip += f" (first token {_fmt(item.inner)} {unit})"
        body.append(f'<rect class="{css}" x="{x:.1f}" y="{height - h:.1f}" width="{w:.1f}" height="{h:.1f}">'
                    f"<title>{escape(tip)}</title></rect>")
        if item.inner is not None:
            ih = max(item.inner / top * (height - 2), 1)
            body.append(f'<rect class="bar-inner" x="{x + w / 4:.1f}" y="{height - ih:.1f}" width="{w / 2:.1f}" '
                        f'height="{ih:.1f}"><title>{escape(tip)}</title></rect>')
    return _svg(width, height, label, body, "bars")


def sparkline(values: Sequence[float], label: str) -> str:
    """A metric over the runs of a repeated test: its trend and spread in a line's height."""
    if len(values) < 2:
        return ""
    width, height = 120, 24
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 2 - (v - low) / span * (height - 4):.1f}"
                      for i, v in enumerate(values))
    dots = "".join(f'<circle class="dot" cx="{i * step:.1f}" cy="{height - 2 - (v - low) / span * (height - 4):.1f}" '
                   f'r="1.8"><title>run {i + 1}: {escape(_fmt(v))}</title></circle>' for i, v in enumerate(values))
    return _svg(width, height, label, [f'<polyline class="line" points="{points}"/>', dots], "spark")


@dataclass
class Span:
    label: str
    start: float
    end: float
    first: float | None = None


@dataclass
class Mark:
    label: str
    at: float
    detail: str = ""


def timeline_end(spans: Sequence[Span], marks: Sequence[Mark]) -> float:
    return max([s.end for s in spans] + [m.at for m in marks] + [1.0])


def timeline(spans: Sequence[Span], marks: Sequence[Mark], label: str) -> str:
    """Turns as spans (sent -> complete) on the upper row, events as ticks below, on one time axis in ms
    from 0 to `timeline_end` (which the caption states, for the same reason as in `bars`)."""
    if not spans and not marks:
        return ""
    end = timeline_end(spans, marks)
    width, height = 600, 44
    scale = (width - 8) / end
    body = [f'<line class="axis" x1="4" y1="{height - 4}" x2="{width - 4}" y2="{height - 4}"/>']
    for span in spans:
        x = 4 + span.start * scale
        w = max((span.end - span.start) * scale, 1.5)
        tip = f"{span.label}: {_fmt(span.start)}-{_fmt(span.end)} ms"
        body.append(f'<rect class="span" x="{x:.1f}" y="4" width="{w:.1f}" height="14" rx="2">'
                    f"<title>{escape(tip)}</title></rect>")
        if span.first is not None:
            fx = 4 + span.first * scale
            body.append(f'<line class="first" x1="{fx:.1f}" y1="4" x2="{fx:.1f}" y2="18">'
                        f"<title>{escape(span.label)}: first token at {escape(_fmt(span.first))} ms</title></line>")
    for mark in marks:
        x = 4 + mark.at * scale
        tip = f"{mark.label} at {_fmt(mark.at)} ms" + (f": {mark.detail}" if mark.detail else "")
        body.append(f'<g class="mark"><line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{height - 4}"/>'
                    f'<circle cx="{x:.1f}" cy="28" r="3"/><title>{escape(tip)}</title></g>')
    return _svg(width, height, label, body, "timeline")


def speech(user: Sequence[Span], agent: Sequence[Span], marks: Sequence[Mark], end: float, label: str) -> str:
    """Both sides' speech on one time axis (ms, 0 to `end`): the user's row above, the agent's below, barge-ins
    as ticks; the same timeline as the run's audio.wav."""
    if not user and not agent:
        return ""
    width, height = 600, 52
    scale = (width - 8) / max(end, 1.0)
    body = [f'<line class="axis" x1="4" y1="{height - 4}" x2="{width - 4}" y2="{height - 4}"/>']
    for row, spans, css in ((4, user, "user-speech"), (24, agent, "agent-speech")):
        for span in spans:
            x, w = 4 + span.start * scale, max((span.end - span.start) * scale, 1.5)
            tip = f"{span.label}: {_fmt(span.start)}-{_fmt(span.end)} ms"
            body.append(f'<rect class="{css}" x="{x:.1f}" y="{row}" width="{w:.1f}" height="16" rx="2">'
                        f"<title>{escape(tip)}</title></rect>")
    for mark in marks:
        x = 4 + mark.at * scale
        body.append(f'<g class="mark"><line x1="{x:.1f}" y1="2" x2="{x:.1f}" y2="{height - 4}"/>'
                    f"<title>{escape(mark.label)} at {_fmt(mark.at)} ms</title></g>")
    return _svg(width, height, label, body, "timeline")
