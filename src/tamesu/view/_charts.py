"""The view's charts of a value over runs: inline SVG with a labelled value axis (unit, min and max), the runs'
axis, each point's value printed beside it (and in its tooltip), the SLO as a dashed line; the runs page's
pass-rate bars on the same axes; and the line that stands for a metric that never changed, in place of a flat
chart."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 640, 170
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 18, 30
"""Room for the value axis' labels on the left, the runs' axis labels below, a printed value above a point."""
MAX_PRINTED = 20
"""Beyond this many points their values would overlap: they are given on hover only (min and max stay printed)."""


def unit(name: str) -> str:
    """The unit a metric's name says it is in (`turn_latency_ms_p95`: ms), "" for a count or a ratio."""
    parts = name.lower().split("_")
    for suffix, said in (("ms", "ms"), ("usd", "USD"), ("s", "s"), ("bytes", "bytes"), ("tokens", "tokens"),
                         ("db", "dB"), ("hz", "Hz")):
        if suffix in parts[1:]:
            return said
    return ""


def value_text(value: float, said: str) -> str:
    """A value as read on a chart: at most 4 significant digits, with its unit."""
    text = f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if said == "USD":
        return f"${text}"
    return f"{text} {said}" if said else text


def constant(values: Sequence[float]) -> bool:
    """Every value the same: a chart would be a flat line saying less than one sentence."""
    return len(values) > 0 and max(values) == min(values)


def constant_line(name: str, values: Sequence[float]) -> str:
    runs = f"in all {len(values)} runs" if len(values) > 1 else "in its only run"
    return (f'<li class="constant"><code>{escape(name)}</code> is constant: '
            f"{escape(value_text(values[0], unit(name)))} {runs}</li>")


def trend(values: Sequence[float], labels: Sequence[str], name: str, limit: float | None = None,
          said: str | None = None) -> str:
    """A value over runs, oldest left, on labelled axes; `limit` (an SLO) dashed, points over it red. `said`
    is the unit (default: from the name)."""
    if not values:
        return ""
    said = unit(name) if said is None else said
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    bounds = [*values, *([limit] if limit is not None else [])]
    top, low = max(bounds), min(0.0, min(bounds))
    top = top if top > low else low + 1.0
    step = plot_w / max(1, len(values) - 1)

    def x(i: int) -> float:
        return LEFT + (i * step if len(values) > 1 else plot_w / 2)

    def y(v: float) -> float:
        return TOP + plot_h - (v - low) / (top - low) * plot_h

    body = [
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>',
        f'<line class="axis" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>',
        f'<text class="axis-label y-max" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">'
        f"{escape(value_text(top, said))}</text>",
        f'<text class="axis-label y-min" x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end">'
        f"{escape(value_text(low, said))}</text>",
        f'<text class="axis-label x-first" x="{LEFT}" y="{HEIGHT - 8}">oldest</text>',
        f'<text class="axis-label x-title" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"{len(values)} run{'s' if len(values) != 1 else ''}{f' ({escape(said)})' if said else ''}</text>",
        f'<text class="axis-label x-last" x="{LEFT + plot_w}" y="{HEIGHT - 8}" text-anchor="end">newest</text>',
    ]
    if len(values) > 1:
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        body.append(f'<polyline class="line" points="{points}"/>')
    if limit is not None:
        body.append(f'<line class="slo" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(limit):.1f}" y2="{y(limit):.1f}">'
                    f"<title>SLO {escape(name)} ≤ {escape(value_text(limit, said))}</title></line>")
    printed = len(values) <= MAX_PRINTED
    for i, (v, label) in enumerate(zip(values, labels, strict=True)):
        over = limit is not None and v > limit
        shown = value_text(v, said)
        body.append(f'<circle class="{"bad" if over else "dot"}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="3">'
                    f"<title>{escape(label)}: {escape(shown)}</title></circle>")
        if printed:
            # the ends' values lean inwards, so the chart's edges never cut them
            at, anchor = (x(i) + 4, "start") if i == 0 and len(values) > 1 else \
                (x(i) - 4, "end") if i == len(values) - 1 and len(values) > 1 else (x(i), "middle")
            body.append(f'<text class="value" x="{at:.1f}" y="{y(v) - 6:.1f}" text-anchor="{anchor}">'
                        f"{escape(shown)}</text>")
    label = f"{name} over {len(values)} runs, from {value_text(min(values), said)} to " \
            f"{value_text(max(values), said)}" + (f", SLO {value_text(limit, said)}" if limit is not None else "")
    return (f'<svg class="chart trend" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
            f"<title>{escape(label)}</title>{''.join(body)}</svg>")


def _runs_axis(count: int, plot_w: float, plot_h: float) -> list[str]:
    """The runs' axis under a chart: oldest on the left, how many runs in the middle, newest on the right."""
    return [
        f'<line class="axis" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>',
        f'<text class="axis-label x-first" x="{LEFT}" y="{HEIGHT - 8}">oldest</text>',
        f'<text class="axis-label x-title" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"{count} run{'s' if count != 1 else ''}</text>",
        f'<text class="axis-label x-last" x="{LEFT + plot_w}" y="{HEIGHT - 8}" text-anchor="end">newest</text>',
    ]


def pass_rate_bars(rates: Sequence[tuple[str, float | None]]) -> str:
    """Pass rate per run, oldest left: one bar each, the passed share green over the rest red, on a 0-100 %
    axis, each bar's rate printed above it (and on hover, with its run); a run where no test ran is a gap
    that says so on hover."""
    if not rates:
        return ""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / len(rates)
    bar = max(min(step * 0.8, 48.0), 1.0)
    body = [
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>',
        f'<text class="axis-label y-max" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">100%</text>',
        f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h / 2:.1f}" '
        f'y2="{TOP + plot_h / 2:.1f}"/>',
        f'<text class="axis-label y-mid" x="{LEFT - 6}" y="{TOP + plot_h / 2 + 4:.1f}" text-anchor="end">50%</text>',
        f'<text class="axis-label y-min" x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end">0%</text>',
        *_runs_axis(len(rates), plot_w, plot_h),
    ]
    printed = len(rates) <= MAX_PRINTED
    for i, (label, rate) in enumerate(rates):
        x = LEFT + i * step + (step - bar) / 2
        middle = x + bar / 2
        if rate is None:
            body.append(f'<text class="value none" x="{middle:.1f}" y="{TOP + plot_h - 4}" text-anchor="middle">'
                        f"–<title>{escape(label)}: no test ran</title></text>")
            continue
        shown = f"{rate:.0%}"
        good = plot_h * rate
        tip = f"<title>{escape(label)}: {shown} passed</title>"
        body.append(f'<rect class="s-failed" x="{x:.1f}" y="{TOP}" width="{bar:.1f}" height="{plot_h}">{tip}</rect>')
        body.append(f'<rect class="s-passed" x="{x:.1f}" y="{TOP + plot_h - good:.1f}" width="{bar:.1f}" '
                    f'height="{good:.1f}">{tip}</rect>')
        if printed:
            body.append(f'<text class="value" x="{middle:.1f}" y="{TOP - 5}" text-anchor="middle">{shown}</text>')
    known = [rate for _, rate in rates if rate is not None]
    label = f"pass rate of the last {len(rates)} runs" + \
        (f", from {min(known):.0%} to {max(known):.0%}" if known else "")
    return (f'<svg class="chart pass-rate" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}">'
            f"<title>{escape(label)}</title>{''.join(body)}</svg>")
