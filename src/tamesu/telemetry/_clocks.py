"""How far the agent's clock is from tamesu's, read from the traces whose id says which turn they are of.

A span of a trace no turn owns alone (a conversation's, or one id sent with several turns) is placed on a turn
by when it started, on the agent's clock, against when tamesu sent each turn, on its own: a skew of seconds
between the two (an agent on another machine, a container's clock) put a turn's spans on the turn before or
after it, or before the first. The traces a turn sent alone bound the skew: the agent cannot start work on a
turn before tamesu sent it (so its earliest span of the turn's trace minus the send time is at least the skew)
nor after it answered (so that span minus the answer's time is at most the skew); the conversation's earliest
span cannot precede the handshake. When those bounds leave out zero, the clocks disagree and the agent's times
are read with the tightest bound taken off; when zero is possible, or the bounds contradict each other (spans
of several clocks), the clocks are taken as they are.

A target whose turns carry no trace of their own (a Twilio stream, a SIP call, a Pipecat bot) has the handshake
alone: the agent's span under tamesu's conversation span (the one the handshake's `traceparent` named) started
after tamesu sent the handshake and before tamesu went on to its first turn (the handshake was answered by
then). Those two bound the skew from both sides, so an agent ahead is seen as well as one behind; the lower
bound is the one taken off (the handshake took a network round trip, a turn's span may start a millisecond
after its send: read with the upper bound, such a span fell on the turn before).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tamesu.telemetry.spans import Span


@dataclass
class Sent:
    """When tamesu sent what, on its own clock (ns since the epoch)."""

    turns: dict[int, int] = field(default_factory=dict)
    """Each turn's send (its first trace expected)."""
    answered: dict[int, int] = field(default_factory=dict)
    """Each turn's answer (or failure)."""
    conversation: int | None = None
    """The conversation's trace, made before its handshake."""
    first_turn: int | None = None
    """The first turn's start (sent, or listened for): the handshake was over by then."""


def skew_ns(spans: Iterable[Span], own: Mapping[str, int], conversation: Iterable[str], sent: Sent,
            parents: Mapping[str, str] | None = None) -> int:
    """The agent's clock minus tamesu's, as the traces show it: 0 unless they show it is not 0. `own`: each
    trace id sent with one turn alone; `conversation`: the conversation's trace ids; `parents`: the span id of
    tamesu's each trace's `traceparent` named (the agent's entry span's parent)."""
    spans = list(spans)
    earliest: dict[str, int] = {}
    for span in spans:
        if span.start_unix_nano > 0:
            earliest[span.trace_id] = min(earliest.get(span.trace_id, span.start_unix_nano), span.start_unix_nano)
    highs: list[int] = []
    lows: list[int] = []
    for trace_id, turn in own.items():
        if trace_id in earliest and turn in sent.turns:
            highs.append(earliest[trace_id] - sent.turns[turn])
            if turn in sent.answered:
                lows.append(earliest[trace_id] - sent.answered[turn])
    conversation = set(conversation)
    handshake_high = [earliest[t] - sent.conversation for t in conversation if t in earliest] \
        if sent.conversation is not None else []
    handshake_low = _handshake_low(spans, conversation, parents or {}, sent)
    if not highs:
        return _handshake_only(min(handshake_high, default=None), handshake_low)
    highs.extend(handshake_high)
    if handshake_low is not None:
        lows.append(handshake_low)
    high, low = min(highs), max(lows, default=None)
    if low is not None and low > high:
        return 0
    # the agent's server span starts a network hop after the send: `high` is the skew within that hop
    return high if high < 0 or (low is not None and low > 0) else 0


def _handshake_low(spans: list[Span], conversation: set[str], parents: Mapping[str, str], sent: Sent) -> int | None:
    """The skew's lower bound the handshake gives: the agent's span under tamesu's conversation span started
    before the first turn began (strictly: the handshake was answered in between), or None without one."""
    if sent.first_turn is None:
        return None
    entries = [s.start_unix_nano for s in spans if s.trace_id in conversation and s.start_unix_nano > 0
               and s.parent_span_id is not None and s.parent_span_id == parents.get(s.trace_id)]
    return min(entries) - sent.first_turn + 1 if entries else None


def _handshake_only(high: int | None, low: int | None) -> int:
    """The skew with no turn's own trace: the handshake's bounds, the lower taken off (a turn's span starts
    within a millisecond of its send, the handshake took a round trip: the upper bound put it a turn early)."""
    if high is None:
        return 0
    if low is None:  # no entry span: only an agent behind is told
        return high if high < 0 else 0
    if low > high:
        return 0
    return low if low > 0 or high < 0 else 0


def turn_at(start_ns: int, starts: list[tuple[int, int]]) -> int | None:
    """The turn going on at `start_ns` (both on one clock): the last one sent at or before it."""
    return next((turn for at, turn in reversed(starts) if at <= start_ns), None)
