"""One run's turns in the HTML report: the transcript as chat bubbles (tool calls, hand-offs, a browser's steps,
each turn's span waterfall and its trace id, linked to the agent's tracing UI), the run's metrics beside its latency
chart, and the timeline of its events with their listing."""

from __future__ import annotations

from pathlib import Path

from tamesu.report import _svg
from tamesu.report._html_text import SPECIAL, clip, esc, ms, num, short, text_of
from tamesu.report._steps import step_html
from tamesu.report.waterfall import before_first_turn, turn_spans, waterfall
from tamesu.report.words import failed_turns
from tamesu.results.records import RunResult
from tamesu.telemetry.spans import SpansFile
from tamesu.telemetry.traceparent import trace_link


def trace(trace_id: str | None, trace_url: str | None) -> str:
    """The turn's trace id, linked to the agent's tracing UI when the project set `trace_url`."""
    if not trace_id:
        return ""
    url = trace_link(trace_url, trace_id) if trace_url else None
    if SPECIAL.search(trace_id) is None:  # a W3C trace id is hex: one search rather than two escapes a turn
        tid, shown = trace_id, f"trace {trace_id[:8]}"
    else:
        tid, shown = esc(trace_id), esc(f"trace {trace_id[:8]}")
    if url is None:
        return f' · <span class="trace" title="trace id {tid}">{shown}</span>'
    return f' · <a class="trace" href="{esc(url)}" title="trace id {tid}">{shown}</a>'


def chat(detail: RunResult, folder: Path | None = None, traced: bool = True, trace_url: str | None = None) -> str:
    """The run's turns as bubbles. `traced`: whether the run folder holds a spans.json to read (its listing says
    so); `trace_url`: the project's link to the agent's tracing UI."""
    if not detail.turns:
        return ""
    spans = _spans(folder) if traced else None
    bubbles = [before_first_turn(spans)] if spans is not None else []
    failed = failed_turns(detail.events)
    for turn in detail.turns:
        if turn.user is not None:
            said = turn.user.display()
            source = esc(f" · {turn.user.source}") if turn.user.source != "script" else ""
            bubbles.append(f'<div class="msg user"><div class="who">user · turn {turn.index}{source}</div>'
                           f'<div class="text">{esc(said)}</div></div>')
        agent = turn.agent
        if turn.cut is not None:  # sent, never answered: the test's timeout ran out while the agent answered
            # its trace as an answered turn's: what the agent was doing when the time ran out is in it
            bubbles.append(f'<div class="msg agent"><div class="who">agent · turn {turn.index} · cut short after '
                           f'{ms(agent.latency_ms)}{trace(agent.trace_id, trace_url)}</div>'
                           f'<div class="text"><i>(no answer)</i></div>'
                           f'<div class="error">the turn was cut short: {esc(turn.cut)}</div></div>')
            continue
        facts = [f"agent · turn {turn.index}", ms(agent.latency_ms)]
        if agent.first_token_ms is not None:
            facts.append(f"first token {ms(agent.first_token_ms)}")
        if agent.status is not None and not 200 <= agent.status < 300:
            facts.append(f"HTTP {agent.status}")
        tools = "" if not agent.tool_calls else "".join(
            f'<details class="tool"><summary>tool {esc(call.kind if call.kind != "tool" else "")} '
            f"<code>{esc(call.name)}({esc(short(call.args, 120))})</code></summary>"
            f"<pre>{esc(short(call.result, 2000))}</pre></details>" for call in agent.tool_calls)
        handoff = ""
        if agent.handoff is not None:
            handoff = (f'<div class="handoff">handed to {esc(agent.handoff.to or "a person")}'
                       f'{": " + esc(agent.handoff.summary) if agent.handoff.summary else ""}</div>')
        ended = '<div class="dim">the agent ended the conversation</div>' if agent.ended else ""
        response = agent.response
        # only a browser's turn has a screenshot or a step to show (step_html says "" for any other)
        shots = step_html(response, folder) if folder is not None and isinstance(response, dict) and (
            "screenshot" in response or "step" in response) else ""
        text = agent.text
        if not text and isinstance(agent.response, dict):  # a failed browser step says why
            text = str(agent.response.get("failure", ""))
        # the facts are words and numbers: nothing in them to escape
        who = " · ".join(facts) + (trace(agent.trace_id, trace_url) if agent.trace_id else "")
        drawn = waterfall(turn.index, drawing) \
            if spans is not None and (drawing := turn_spans(turn.index, agent.latency_ms, spans)) else ""
        why = failed.get(turn.index)
        shown = esc(text) or ("<i>(no answer)</i>" if why is not None else "<i>(no text)</i>")
        failure = "" if why is None else f'<div class="error">the turn failed: {esc(why)}</div>'
        bubbles.append(f'<div class="msg agent"><div class="who">{who}</div>'
                       f'<div class="text">{shown}</div>{failure}{tools}{handoff}{ended}'
                       f"{shots}{drawn}</div>")
    return f'<div class="chat" aria-label="transcript">{"".join(bubbles)}</div>'


def metrics(detail: RunResult) -> str:
    if not detail.metrics and not detail.turns:
        return ""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{num(v)}</td></tr>" for k, v in sorted(detail.metrics.items()))
    bars = [_svg.Bar(f"turn {t.index}", t.agent.latency_ms, t.agent.first_token_ms,
                     failed=t.agent.status is not None and t.agent.status >= 500)
            for t in detail.turns if t.cut is None]  # a turn the timeout cut short took no latency to answer
    chart = _svg.bars(bars, "latency per turn")
    streamed = any(b.inner is not None for b in bars)
    caption = f"latency per turn, tallest {ms(max((b.value for b in bars), default=0))}" + \
        (" (first token inside)" if streamed else "")
    figure = f"<figure>{chart}<figcaption>{caption}</figcaption></figure>" if chart else ""
    table = (f'<div class="scroll"><table class="metrics"><caption>metrics</caption>{rows}</table></div>'
             if rows else "")
    return f'<div class="metrics-box">{table}{figure}</div>'


def events(detail: RunResult) -> str:
    if not detail.events and not detail.turns:
        return ""
    spans = [_svg.Span(f"turn {t.index}", t.agent.sent_at_ms, t.agent.completed_at_ms, t.agent.first_token_at_ms)
             for t in detail.turns]
    # each event's data as text once: the timeline's hover shows 200 characters of it, the table 300
    shown = [text_of(e.data) if e.data else "" for e in detail.events]
    marks = [_svg.Mark(e.name, e.at_ms, clip(text, 200)) for e, text in zip(detail.events, shown, strict=True)]
    chart = _svg.timeline(spans, marks, "timeline of turns and events")
    end = _svg.timeline_end(spans, marks)
    rows = "".join(f'<tr><td class="num">{e.at_ms:.1f}</td><th>{esc(e.name)}</th>'
                   f'<td><code>{esc(clip(text, 300))}</code></td></tr>'
                   for e, text in zip(detail.events, shown, strict=True))
    count = f"{len(detail.events)} event{'s' if len(detail.events) != 1 else ''}"
    listing = (f'<details class="events"><summary>{count}</summary><div class="scroll">'
               f'<table><tr><th>ms</th><th>event</th><th>data</th></tr>{rows}</table></div></details>'
               if rows else "")
    return (f'<figure class="timeline-box">{chart}<figcaption>timeline from 0 to {ms(end)}: turns above, '
            f"events below (hover for details)</figcaption></figure>{listing}")


def _spans(folder: Path | None) -> SpansFile | None:
    """The run's spans.json (`traces:`), or None when it has none or it cannot be read."""
    if folder is None:
        return None
    try:
        return SpansFile.model_validate_json((folder / "spans.json").read_bytes())
    except (OSError, ValueError):
        return None
