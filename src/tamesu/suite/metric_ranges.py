"""The values a built-in metric can take, so a bound no run could meet is refused where it is written.

`metric: {name: turns, lte: -1}` (a count is never negative), `{name: talk_over_ratio, gt: 1}` (a ratio is never
above 1), `{gt: 5, lt: 3}` (no number is both) and `defaults.slo: {llm_cost_usd: -1}` passed `tamesu validate`
and failed every run of every test as the agent's fault. A metric of a plug-in, or one that may be negative (an
interruption's stop measured against its onset), is left as written. `tests/checks/test_metric_ranges.py` keeps
every name here one that some run or built-in target measures."""

from __future__ import annotations

import re
from collections.abc import Mapping

from tamesu.matching import number_text

COUNTS = frozenset({
    # every run's, tamesu's own model spending, the remote agents and fuzzed tools (`plan._slo_names._RUN`)
    "turns", "llm_tokens", "llm_retries", "llm_timeouts", "llm_cost_usd", "tools_fuzzed", "delegations",
    "delegations_refused", "counterpart_delegations", "counterpart_tools_fuzzed", "counterpart_delegations_refused",
    # the agent's spans (`telemetry.genai.SPAN_METRICS`) and what came of them
    "trace_spans", "llm_input_tokens", "llm_output_tokens", "agent_errors", "trace_not_found", "trace_incomplete",
    "trace_spans_received", "trace_spans_over_limit",
    # the built-in targets' own (`Target.metric_names`)
    "a2a_pushes", "a2a_requests", "a2a_resubscribes", "a2a_skills", "a2a_tasks", "browser_blocked", "browser_mocked",
    "browser_steps", "goal_steps", "grpc_events", "mcp_tool_calls", "mcp_tool_errors", "mcp_tool_timeouts",
    "mcp_tools_refused", "model_calls", "pipecat_bot_interrupted", "pipecat_clears", "pipecat_dtmf_sent",
    "pipecat_marks", "pipecat_messages", "pipecat_rtvi_errors", "pipecat_tool_calls", "realtime_events",
    "realtime_responses", "rest_requests", "twilio_clears", "twilio_dtmf_sent", "twilio_marks", "twilio_messages",
    "voice_clears", "voice_dtmf_sent", "voice_marks", "voice_messages", "tool_arguments_invalid",
    "stt_word_error_rate"})
"""Counts and amounts: never negative (a word error rate may pass 1: words the agent never said)."""

DURATIONS = frozenset({
    "turn_latency_ms", "time_to_first_token_ms", "llm_time_ms", "tool_time_ms", "call_duration_ms", "call_setup_ms",
    "ring_ms", "greeting_ms", "agent_speech_ms", "user_speech_ms", "silence_gap_max_ms", "time_to_first_audio_ms",
    "barge_in_late_ms", "frame_late_ms", "loop_lag_ms", "loop_cpu_ms"})
"""Lengths of time from an earlier moment to a later one, on one clock: never negative."""

RATIOS = frozenset({"talk_over_ratio"})
"""A part of a whole: from 0 to 1."""

_STATISTIC = re.compile(r"_(?:p\d{1,2}(?:\.\d+)?|max|min|mean|total)$")
"""A distribution's statistic (`turn_latency_ms_p95`) or a span metric's sum over the run (`llm_time_ms_total`):
each as far from negative as what it is of."""

_SAID = {"equals": "is", "lt": "is less than", "lte": "is at most", "gt": "is more than", "gte": "is at least"}


def _kind(name: str) -> str | None:
    base = _STATISTIC.sub("", name)
    for kind, names in (("count", COUNTS), ("duration", DURATIONS), ("ratio", RATIOS)):
        if name in names or base in names:
            return kind
    return None


def unmeetable(name: str, bounds: Mapping[str, object]) -> str | None:
    """Why no value of the metric `name` meets `bounds` (`equals`, `lt`, `lte`, `gt`, `gte`; others ignored), or
    None when one may."""
    numbers = {key: float(value) for key, value in bounds.items()
               if key in _SAID and isinstance(value, int | float) and not isinstance(value, bool)}
    kind = _kind(name)
    if kind is not None:
        top = 1.0 if kind == "ratio" else None
        range_said = f"{name} is a ratio, from 0 to 1" if kind == "ratio" else f"{name} is never negative"
        for key, value in numbers.items():
            below = value <= 0 if key == "lt" else value < 0 if key in ("lte", "equals") else False
            above = top is not None and (value >= top if key == "gt" else value > top if key in ("gte", "equals")
                                         else False)
            if below or above:
                return f"no value of {name} {_SAID[key]} {number_text(value)}: {range_said}"
    # bounds no number meets together (`{gt: 5, lt: 3}`, `{equals: 2, gte: 3}`)
    low, low_open = max(((v, k == "gt") for k, v in numbers.items() if k in ("gt", "gte", "equals")),
                        default=(None, False), key=lambda pair: (pair[0], pair[1]))
    high, high_open = min(((v, k == "lt") for k, v in numbers.items() if k in ("lt", "lte", "equals")),
                          default=(None, False), key=lambda pair: (pair[0], not pair[1]))
    if low is not None and high is not None and (low > high or (low == high and (low_open or high_open))):
        said = ", ".join(f"{key}: {number_text(value)}" for key, value in numbers.items())
        return f"no value of {name} meets {said} together"
    return None
