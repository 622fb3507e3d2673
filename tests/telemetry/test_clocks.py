"""How far the agent's clock is from tamesu's, as the bounds its traces give say it (`telemetry._clocks`): the
cases a run against a real agent does not reach at will (the real ones: `test_trace_targets.py`)."""

from __future__ import annotations

from tamesu.telemetry._clocks import Sent, skew_ns, turn_at
from tamesu.telemetry.spans import Span

S = 1_000_000_000


def span(trace_id: str, start: int) -> Span:
    return Span(trace_id=trace_id, span_id="0" * 15 + "1", name="x", start_unix_nano=start, end_unix_nano=start + 1)


def test_clocks_that_agree_within_a_turn_are_taken_as_they_are() -> None:
    # each turn's first span between its send and its answer: nothing to take off
    sent = Sent(turns={1: 100 * S, 2: 110 * S}, answered={1: 102 * S, 2: 112 * S})
    spans = [span("a", 100 * S + 5_000_000), span("b", 110 * S + 3_000_000)]
    assert skew_ns(spans, {"a": 1, "b": 2}, [], sent) == 0


def test_an_agent_behind_or_ahead_is_read_by_its_tightest_bound() -> None:
    sent = Sent(turns={1: 100 * S, 2: 110 * S}, answered={1: 102 * S, 2: 112 * S})
    behind = [span("a", 97 * S + 5_000_000), span("b", 107 * S + 3_000_000)]
    assert skew_ns(behind, {"a": 1, "b": 2}, [], sent) == -3 * S + 3_000_000
    ahead = [span("a", 105 * S + 5_000_000), span("b", 115 * S + 3_000_000)]
    assert skew_ns(ahead, {"a": 1, "b": 2}, [], sent) == 5 * S + 3_000_000


def test_the_handshake_alone_without_the_agents_span_under_it_shows_only_an_agent_behind() -> None:
    sent = Sent(conversation=100 * S)
    assert skew_ns([span("c", 98 * S)], {}, ["c"], sent) == -2 * S
    # ahead is not told from a connection that took 2 s: no turn's answer bounds it
    assert skew_ns([span("c", 102 * S)], {}, ["c"], sent) == 0


def test_the_agents_span_under_the_handshake_shows_it_ahead_or_behind() -> None:
    # sent at 100 s, the first turn at 100.5 s: the agent's span under tamesu's conversation span (parent "tp")
    # started in between, on its clock; the lower bound is taken off, so turn 1 starts after that span
    sent = Sent(conversation=100 * S, first_turn=100 * S + S // 2)
    ahead = Span(trace_id="c", span_id="e" * 16, parent_span_id="tp", name="session", start_unix_nano=103 * S + 50)
    assert skew_ns([ahead], {}, ["c"], sent, {"c": "tp"}) == 3 * S - S // 2 + 51
    behind = ahead.model_copy(update={"start_unix_nano": 97 * S + 50})
    assert skew_ns([behind], {}, ["c"], sent, {"c": "tp"}) == -3 * S - S // 2 + 51
    # a span under another one of the agent's bounds nothing from above (it may have started turns later)
    later = ahead.model_copy(update={"parent_span_id": "f" * 16})
    assert skew_ns([later], {}, ["c"], sent, {"c": "tp"}) == 0


def test_bounds_that_contradict_each_other_leave_the_clocks_as_they_are() -> None:
    # one turn's spans say the agent is 5 s ahead, another's that it is behind: two clocks (two services)
    sent = Sent(turns={1: 100 * S, 2: 110 * S}, answered={1: 101 * S, 2: 111 * S})
    spans = [span("a", 106 * S), span("b", 109 * S)]
    assert skew_ns(spans, {"a": 1, "b": 2}, [], sent) == 0


def test_a_span_is_on_the_turn_last_sent_before_it() -> None:
    starts = [(10, 1), (20, 2)]
    assert [turn_at(at, starts) for at in (5, 10, 15, 20, 99)] == [None, 1, 1, 2, 2]
