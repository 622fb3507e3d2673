"""What the OpenTelemetry GenAI semantic conventions say about an agent's spans: its model calls, its tool calls
with their arguments, tokens, errors; the metrics tamesu derives from them and the summary a judge reads."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from tamesu.telemetry.spans import Span

LLM_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})
TOOL_OPERATION = "execute_tool"
SPAN_METRICS = ("trace_spans", "llm_time_ms", "tool_time_ms", "llm_input_tokens", "llm_output_tokens",
                "agent_errors")


def from_spans(metric: str) -> bool:
    """Whether a metric's name (`llm_time_ms_p95`, `trace_spans_total`) is one tamesu measures from the agent's
    spans (`traces:`)."""
    if metric.startswith("trace_"):
        return True
    base = re.sub(r"_(total|max|min|mean|p\d{1,2})$", "", metric)
    return base in SPAN_METRICS


def operation(span: Span) -> str | None:
    value = span.attributes.get("gen_ai.operation.name")
    return value if isinstance(value, str) else None


def tool_name(span: Span) -> str:
    name = span.attributes.get("gen_ai.tool.name")
    return name if isinstance(name, str) and name else span.name.removeprefix(f"{TOOL_OPERATION} ").strip()


def _arguments(value: object) -> dict[str, object]:
    """`gen_ai.tool.call.arguments` is JSON text (opt-in): its object, or nothing when it is not recorded."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"arguments": value}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {}


def _result(value: object) -> object:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def tool_calls(spans: Iterable[Span]) -> list[dict[str, Any]]:
    """The agent's tool calls as its `execute_tool` spans record them, in the order they started: each with
    the fields of a `ToolCall` (name, args, result, turn)."""
    found = [s for s in spans if operation(s) == TOOL_OPERATION]
    return [{"name": tool_name(s), "args": _arguments(s.attributes.get("gen_ai.tool.call.arguments")),
             "result": _result(s.attributes.get("gen_ai.tool.call.result")), "turn": s.turn}
            for s in sorted(found, key=lambda s: s.start_unix_nano)]


def whereabouts(span: Span) -> str:
    """A span as a failure names it: its turn, and its error's message."""
    parts = [f"turn {span.turn}"] if span.turn else []
    if span.status == "error":
        parts.append(f"error: {excerpt(span.status_message)}" if span.status_message else "error")
    return f"{span.name} ({', '.join(parts)})" if parts else span.name


def excerpt(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters at an ellipsis: a secret cut in two there is still masked (the masking
    knows a secret's start before an ellipsis); cut bare, its first characters would be written as they are."""
    return text if len(text) <= limit else f"{text[:limit]}…"


def measures(spans: list[Span]) -> dict[str, float]:
    """The span metrics of some spans (one turn's, or a run's)."""
    llm = [s for s in spans if operation(s) in LLM_OPERATIONS]
    tools = [s for s in spans if operation(s) == TOOL_OPERATION]
    return {
        "trace_spans": float(len(spans)),
        "llm_time_ms": round(sum(s.duration_ms for s in llm), 3),
        "tool_time_ms": round(sum(s.duration_ms for s in tools), 3),
        "llm_input_tokens": float(sum(_number(s.attributes.get("gen_ai.usage.input_tokens")) for s in llm)),
        "llm_output_tokens": float(sum(_number(s.attributes.get("gen_ai.usage.output_tokens")) for s in llm)),
        "agent_errors": float(sum(1 for s in spans if s.status == "error")),
    }


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


_SUMMARY_ATTRIBUTES = ("gen_ai.request.model", "gen_ai.tool.name", "gen_ai.tool.call.arguments",
                       "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "error.type")


def summary(spans: list[Span], limit: int = 200) -> str:
    """The run's spans as a judge reads them: one line each, nested by parent, per turn, with tool arguments,
    durations and errors. At most `limit` lines; the rest are counted."""
    lines: list[str] = []
    by_turn: dict[int | None, list[Span]] = {}
    for span in spans:
        by_turn.setdefault(span.turn, []).append(span)
    for turn in sorted(by_turn, key=lambda t: (t is not None, t or 0)):
        lines.append("before the first turn:" if turn is None else f"turn {turn}:")
        for depth, span in nested(by_turn[turn]):
            facts = [f"{span.duration_ms:.0f} ms"]
            facts.extend(f"{key}={_shown(span.attributes[key])}" for key in _SUMMARY_ATTRIBUTES
                         if key in span.attributes)
            if span.status == "error":
                facts.append(f"ERROR {span.status_message}".rstrip())
            lines.append(f"{'  ' * (depth + 1)}{span.name} ({', '.join(facts)})")
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more line(s) not shown"]
    return "\n".join(lines)


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 300 else text[:300] + "..."


def nested(spans: list[Span]) -> list[tuple[int, Span]]:
    """Spans in tree order (a parent before its children, siblings by start), each with its depth; a span
    whose parent is not among them is a root."""
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else None
        children.setdefault(parent, []).append(span)
    ordered: list[tuple[int, Span]] = []
    stack = [(0, s) for s in sorted(children.get(None, []), key=lambda s: s.start_unix_nano, reverse=True)]
    seen: set[int] = set()
    while stack:
        depth, span = stack.pop()
        if id(span) in seen:
            continue  # a span that names itself (or a loop) as its parent: shown once
        seen.add(id(span))
        ordered.append((depth, span))
        below = sorted(children.get(span.span_id, []), key=lambda s: s.start_unix_nano, reverse=True)
        stack.extend((depth + 1, child) for child in below)
    ordered.extend((0, s) for s in spans if id(s) not in seen)  # parents in a loop: no root reaches them
    return ordered
