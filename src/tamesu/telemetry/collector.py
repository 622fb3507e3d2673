"""Spans routed to the run and turn whose trace they belong to, by trace id.

Each run says which trace ids are its own as it sends them (`RunSpans.expect`, before the request goes out, so
no span of the agent's can arrive before its trace is known). A span of any other trace is counted and dropped;
one that arrives after its run was graded is counted as late. A run keeps at most `max_spans`: the rest are
counted (`SpansFile.over_limit`), never silently cut. A graded run's ids leave the routes (its label alone is
remembered, for the late ones). An id runs going at once both sent (a suite's own fixed `traceparent`) goes to
each of them, marked `shared`: whose its spans are cannot be told. What no run kept is counted in `Dropped`
(`_dropped`), which says it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from tamesu.telemetry._clocks import Sent, skew_ns, turn_at
from tamesu.telemetry._dropped import Dropped
from tamesu.telemetry._silence import AgentHeard
from tamesu.telemetry.spans import Span, SpansFile

_CONVERSATION = -1
"""The route of a conversation's trace (or of one id sent with several turns): its spans are placed on turns by
their start time, read on tamesu's clock (`_clocks`)."""
_OTHER_TRACES_REMEMBERED = 100_000
_CLOSED_REMEMBERED = 100_000
"""Trace ids of graded runs, remembered (with the run's label, the oldest let go first) so that a span of one
that comes late is counted as late and said with its run, rather than kept alive with the whole run."""
_UNROUTED_KEPT = 10_000
"""Spans of traces no run has named yet, held for a run that names their id once its turn is answered (an id the
target learned while sending: the suite's own `traceparent`), the oldest traces let go first."""
QUIET_PART = 4
"""A run whose traces are complete stops waiting once no span of them came for `wait / QUIET_PART` (`settle`):
two of the export periods tamesu gives the exporters it starts (`engine.traces.batch_delay_ms`, an eighth of
`wait`), so a second exporter's span (a tool server's, a sub-agent's) that ended before the agent's entry span
comes within it; and a quarter of `wait`, so raising `wait` (what the late spans' warning says) waits longer for
background work that ends after the entry span."""
_POLL_S = 0.05
"""How often a run waiting for its traces looks again while they are not complete."""


class SpanCollector:
    """Every run's spans, fed by the receiver."""

    def __init__(self) -> None:
        self._routes: dict[str, dict[RunSpans, int]] = {}
        """The trace ids of the runs not graded yet, each with the runs that sent it (more than one: a suite's
        own fixed `traceparent`, runs at once) and where its spans go in each; a run's leave when it is graded."""
        self._closed: dict[str, tuple[str, AgentHeard | None, str]] = {}
        """Trace ids of graded runs, with the run's label, agent and folder (`_CLOSED_REMEMBERED`)."""
        self._agents: dict[tuple[str, str], AgentHeard] = {}
        self._other: set[str] = set()
        self._unrouted: dict[str, list[tuple[Span, tuple[str, str] | None]]] = {}
        self._unrouted_count = 0
        self.dropped = Dropped()
        self._going: set[RunSpans] = set()
        """The runs not graded yet: each counts the spans of no run's traces that came meanwhile."""

    def agent(self, name: str, where: str) -> AgentHeard:
        """The target `name` whose spans are looked for at `where`, as every run of it sees it (`_silence`)."""
        return self._agents.setdefault((name, where), AgentHeard(name, where))

    def run(self, max_spans: int, label: str = "", agent: AgentHeard | None = None, folder: str = "") -> RunSpans:
        """`label`: the run as the warnings name it (`suite/test run 2`); `agent`: its target's; `folder`: where its
        result.json is written."""
        run = RunSpans(self, max_spans, label, agent)
        run.folder = folder
        run.alongside = len(self._going)
        for going in self._going:
            going.alongside += 1
        self._going.add(run)
        return run

    @property
    def routed(self) -> int:
        """How many trace ids runs not graded yet wait for."""
        return len(self._routes)

    def closed(self, run: RunSpans, pending: Iterable[str] = ()) -> None:
        """`run` was graded: its traces' later spans are only counted, as late. `pending`: its traces that did
        not come (whole) to the receiver, said at the end unless a late span of them comes."""
        self._going.discard(run)
        if waiting := set(pending):
            self.dropped.pending[run.label] = (waiting, run.waited_for)
        for trace_id in run.trace_ids:
            routes = self._routes.get(trace_id)
            if routes is not None and routes.pop(run, None) is not None and not routes:
                del self._routes[trace_id]
                self._closed.pop(trace_id, None)
                self._closed[trace_id] = (run.label, run.agent, run.folder)
        while len(self._closed) > _CLOSED_REMEMBERED:
            del self._closed[next(iter(self._closed))]

    def take(self, spans: Iterable[Span]) -> None:
        for span in spans:
            routes = self._routes.get(span.trace_id)
            if routes:
                # an id runs open at once share: its spans cannot be told apart, each of them gets them all
                for run, route in routes.items():
                    run.add(span, None if route == _CONVERSATION else route)
            elif (closed := self._closed.get(span.trace_id)) is not None:
                # late for its graded run, unless a run that is going names its id once its turn is answered (a
                # suite's own fixed traceparent, sent by run after run); its agent does export: waited for again
                graded, agent, folder = closed
                if agent is not None:
                    agent.heard()
                self.dropped.late_spans += 1
                late = self.dropped.late_runs
                late[graded] = late.get(graded, 0) + 1
                self.dropped.late_named(folder, span.name, 1)
                if (pending := self.dropped.pending.get(graded)) is not None:
                    pending[0].discard(span.trace_id)  # said late, not still to come
                    if not pending[0]:
                        del self.dropped.pending[graded]
                self._hold(span, (graded, folder))
            else:
                self.dropped.other_spans += 1
                for going in self._going:
                    going.other_spans += 1
                if span.trace_id not in self._other and len(self._other) < _OTHER_TRACES_REMEMBERED:
                    self._other.add(span.trace_id)
                    self.dropped.other_traces += 1
                self._hold(span, None)

    def _hold(self, span: Span, late_for: tuple[str, str] | None) -> None:
        """`late_for`: the graded run it was counted late for (its label and folder), else None (counted as of no
        test's)."""
        self._unrouted.setdefault(span.trace_id, []).append((span, late_for))
        self._unrouted_count += 1
        while self._unrouted_count > _UNROUTED_KEPT:
            oldest = next(iter(self._unrouted))
            self._unrouted_count -= len(self._unrouted.pop(oldest))

    def claim(self, trace_id: str) -> list[Span]:
        """The spans of `trace_id` that came before a run going named it, no longer counted as of no test's (nor
        as late for a graded run that had sent the same id)."""
        held = self._unrouted.pop(trace_id, [])
        self._unrouted_count -= len(held)
        for span, late_for in held:
            if late_for is None:
                self.dropped.other_spans -= 1
                continue
            label, folder = late_for
            self.dropped.late_spans -= 1
            self.dropped.late_runs[label] -= 1
            if not self.dropped.late_runs[label]:
                del self.dropped.late_runs[label]
            self.dropped.late_named(folder, span.name, -1)
        if trace_id in self._other and any(late_for is None for _span, late_for in held):
            self._other.discard(trace_id)
            self.dropped.other_traces -= 1
        return [span for span, _late_for in held]


class RunSpans:
    """One run's side of the collector: the traces it sent, the spans that came back for them."""

    def __init__(self, collector: SpanCollector, max_spans: int, label: str = "",
                 agent: AgentHeard | None = None) -> None:
        self._collector = collector
        self.label = label
        self.agent = agent
        self._waited_whole = False
        """A wait for its spans ran to its end with none come (`hush`)."""
        self._waited_short: float | None = None
        """The shorter wait of a silent agent's run that ended with none of its spans come."""
        self._silence_said = False
        self.max_spans = max_spans
        self.kept: list[Span] = []
        self.received = 0
        self.other_spans = 0
        """Spans of traces no run sent that came while this one went (`SpansFile.other_spans`)."""
        self.alongside = 0
        """The other runs that went at some time while this one did (`SpansFile.runs_alongside`)."""
        self.closed = False
        self.folder = ""  # where the run's result.json is written (`SpanCollector.run`)
        self._turn_starts: list[tuple[int, int]] = []
        """(wall-clock ns, turn): where a conversation trace's spans fall."""
        self._sent = Sent()
        self._turn: int | None = None
        self._own: dict[str, int] = {}
        """Each trace id sent with one turn alone: its spans are that turn's, whatever their clock says."""
        self._conversation: set[str] = set()
        self._parents: dict[str, str] = {}
        """The span id tamesu's `traceparent` named in each trace it sent: the agent's first span's parent."""
        self._entered: set[str] = set()
        """The traces of which the agent's span under tamesu's came: spans of one without it came early of a
        trace whose root (the last span to end, in an exporter's last batch) was still to come."""
        self._quiet_since = time.monotonic()
        self._last_span: float | None = None
        """When a span of this run's traces last came (monotonic)."""
        self._missing: set[tuple[str, str]] = set()
        """(trace id, span id) of the parents spans came naming that have not come themselves (nor are tamesu's):
        an exporter sends a span as it ends, the parent ends later, so one of the trace is still to come."""
        self.trace_ids: list[str] = []
        """Every trace this run sent, in order: what `traces.query` asks the backend for."""
        self.waited_for = 0.0
        """The `traces.wait` its spans were waited for with (`settle`)."""
        self._asked_backend = False
        """Its spans were fetched from a backend (`traces.query`): none of them can come late to a receiver."""
        self.not_found: list[str] = []
        self.shared: set[str] = set()
        """This run's trace ids another run had sent too while both were open (a suite's own fixed
        `traceparent`): each got every span of them, whose they are cannot be told."""
        self._heard: set[str] = set()
        self._ids: set[tuple[str, str]] = set()
        """(trace id, span id) of every span taken: a span id is unique in its trace, so one seen again is the
        same span sent twice (OTLP delivery is at least once), not a second call to count."""

    def expect(self, trace_id: str | None, turn: int | None, parent: str | None = None) -> None:
        """`trace_id` is this run's: a turn's (`turn`), or the conversation's (None); `parent`: the span id its
        `traceparent` named, when tamesu made it."""
        if trace_id is None:
            return
        if parent is not None:
            self._parents.setdefault(trace_id, parent)
        known = self._collector._routes.setdefault(trace_id, {})
        mine = known.get(self)
        if turn is not None and mine == _CONVERSATION:
            return  # a turn that recorded the conversation's trace: its spans are placed by time
        others = [run for run in known if run is not self]
        if others or trace_id in self._collector._closed:
            self._collector.dropped.shared_ids.add(trace_id)
        now = time.time_ns()
        if turn is not None:
            self._turn_starts.append((now, turn))
            self._sent.turns.setdefault(turn, now)
            self._sent.first_turn = self._sent.first_turn or now
            self._turn = turn
        else:
            self._conversation.add(trace_id)
            self._sent.conversation = self._sent.conversation or now
        if trace_id not in self.trace_ids:
            self.trace_ids.append(trace_id)
        route = _CONVERSATION if turn is None else turn
        if turn is not None and mine is not None and mine != turn:
            # one id sent with two turns (a suite's own fixed traceparent): it cannot say which turn a span is
            # of, and the spans placed as they came went to whichever turn was last sent
            route = _CONVERSATION
            self._own.pop(trace_id, None)
            self.kept = [s.model_copy(update={"turn": None}) if s.trace_id == trace_id else s for s in self.kept]
        elif turn is not None:
            self._own[trace_id] = turn
        known[self] = route
        # spans that came before the id was known here: a turn's answered before the target said what it sent
        came = self._collector.claim(trace_id)
        for other in others:  # open at once: whose its spans are cannot be told (`shared`)
            self.shared.add(trace_id)
            other.shared.add(trace_id)
            came.extend(s.model_copy(update={"turn": None}) for s in other.kept if s.trace_id == trace_id)
        for span in came:
            self.add(span, None if route == _CONVERSATION else route)

    def began(self, turn: int, at_ns: int) -> None:
        """`turn` began at `at_ns` (tamesu's clock) with nothing sent: it owns no trace; a conversation's spans
        from then on are its. The first turn's start bounds the agent's clock with the handshake's (over by then)."""
        self._turn_starts.append((at_ns, turn))
        self._sent.first_turn = min(self._sent.first_turn or at_ns, at_ns)

    def fetched(self, spans: Iterable[Span], not_found: list[str]) -> None:
        """What the tracing backend had of this run's traces (`traces.query`), routed as received spans are."""
        self._collector.take(spans)
        self.not_found = list(not_found)
        self._asked_backend = True

    def unheard(self, recorded: Iterable[str]) -> None:
        """With a receiver: the traces the turns recorded (each the one the agent got: its own, or the
        conversation's) of which no span came are `not_found`, as a backend's are (an agent that exported
        nothing read as one that called no tool and failed nowhere)."""
        self.not_found = list(dict.fromkeys(t for t in recorded if t not in self._heard))

    def add(self, span: Span, turn: int | None) -> None:
        if (span.trace_id, span.span_id) in self._ids:
            self._collector.dropped.duplicate_spans += 1
            return
        self._ids.add((span.trace_id, span.span_id))
        self.received += 1
        self._heard.add(span.trace_id)
        if self.agent is not None:
            self.agent.heard()
        self._last_span = time.monotonic()
        self._missing.discard((span.trace_id, span.span_id))
        if span.parent_span_id is not None and span.parent_span_id == self._parents.get(span.trace_id):
            self._entered.add(span.trace_id)
        elif span.parent_span_id is not None and (span.trace_id, span.parent_span_id) not in self._ids:
            self._missing.add((span.trace_id, span.parent_span_id))
        if len(self.kept) < self.max_spans:
            self.kept.append(span.model_copy(update={"turn": turn}) if turn is not None else span)

    def turn_ended(self, own: str | None = None, sent: str | None = None) -> None:
        """The turn whose own trace was `own` was answered (or failed) having sent the agent `sent` (the target's
        `turn_trace_id`): when that is another (a call's or a bot's turns have no carrier of their own, only the
        conversation's handshake; the suite's own `traceparent` won), no span of `own` can come, and it leaves
        the routes now rather than at the run's end (a call of a thousand turns routed a thousand ids no agent
        was sent, and waited for them)."""
        self._quiet_since = time.monotonic()
        if self._turn is not None:
            self._sent.answered[self._turn] = time.time_ns()
        if own is not None and own != sent:
            self._unsent(own)

    def _unsent(self, trace_id: str) -> None:
        if trace_id not in self._own or trace_id in self._heard or trace_id in self.shared:
            return  # only a turn's own id, of which nothing came
        routes = self._collector._routes.get(trace_id)
        if routes is not None and routes.pop(self, None) is not None and not routes:
            del self._collector._routes[trace_id]
        del self._own[trace_id]
        self._parents.pop(trace_id, None)
        if self.trace_ids and self.trace_ids[-1] == trace_id:
            self.trace_ids.pop()
        elif trace_id in self.trace_ids:
            self.trace_ids.remove(trace_id)

    async def settle(self, wait: float, recorded: Iterable[str] = (), carried: Iterable[str] = ()) -> None:
        """Wait for late spans: until the run's traces are complete (`complete`) and none of their spans came for
        a quarter of `wait` since the later of the last one and now (the target closed: a span it ended comes
        within an export period), at most until `wait` seconds after the last turn ended (`patience`: less for an
        agent that has sent no span at all). `recorded`: the
        trace each turn recorded (the one the agent got); `carried`: the traces the target said it sent before
        or between turns (its `conversation_trace` events: a handshake's), waited for as the recorded ones are,
        those of the conversation's trace tamesu made: an agent's span of its connection ends when the target
        closes, after every turn's trace is in (not waited for, it came after the run was graded)."""
        quiet = wait / QUIET_PART
        since = time.monotonic()
        self.waited_for = wait
        # the suite's own traceparent on a handshake is no trace of this run's: nothing of it is routed here
        recorded = set(recorded) | {t for t in carried if t in self._conversation}
        while (now := time.monotonic()) < (deadline := self._quiet_since + self.patience(wait)):
            step = _POLL_S
            if self.complete(recorded):
                done_at = max(since, self._last_span or since) + quiet
                if now >= done_at:
                    return
                step = done_at - now
            await asyncio.sleep(min(step, deadline - now))
        self._waited(wait)

    def patience(self, wait: float) -> float:
        """How long after the last turn this run waits for its spans: `wait`, or a quarter of it for an agent
        none of whose spans came in a whole `wait` since tamesu started (`_silence`), until one of this run's
        comes."""
        silent = self.agent is not None and self.agent.silent and not self._heard
        return wait / QUIET_PART if silent else wait

    def _waited(self, wait: float) -> None:
        if self._heard:
            return
        patience = self.patience(wait)
        if patience < wait:
            self._waited_short = patience
        else:
            self._waited_whole = True

    def hush(self, wait: float) -> None:
        """Once this run's spans were waited for (and fetched): when none came in the whole `wait` and none of its
        agent's ever did, its agent is silent (its later runs wait less), said by this run."""
        if self.agent is not None and self._waited_whole and not self._heard and not self._silence_said:
            self._silence_said = self.agent.waited_in_vain(wait) is not None

    def complete(self, recorded: Iterable[str]) -> bool:
        """Whether every span of the run's traces that will come has come, as far as the spans say: some span
        came (none: `trace_not_found`, after the whole wait), one of every trace in `recorded` (a turn's, a
        handshake's), the agent's
        span under tamesu's of every trace that came and whose `traceparent` tamesu made (its entry span: it
        ends last, so an exporter sends it last), and the parent every span named (other than tamesu's). What
        ends after the entry span (background work) the spans cannot show: the quiet period of `settle` waits
        for it."""
        if not self._heard or self._missing:
            return False
        if any(t not in self._heard for t in recorded):
            return False
        return not any(t in self._heard and t in self._parents and t not in self._entered for t in self.trace_ids)

    def close(self) -> SpansFile:
        """What the run keeps; later spans of its traces are counted as late."""
        self.closed = True
        incomplete = [t for t in self.trace_ids if t in self._heard and t in self._parents and t not in self._entered]
        self._collector.closed(self, () if self._asked_backend else [*self.not_found, *incomplete])
        skew = skew_ns(self.kept, self._own, self._conversation, self._sent, self._parents)
        starts = sorted((at + skew, turn) for at, turn in self._turn_starts)  # on the agent's clock
        for index, span in enumerate(self.kept):
            if span.turn is None and starts:
                # a conversation's span belongs to the turn that was going on when it started
                turn = turn_at(span.start_unix_nano, starts)
                if turn is not None:
                    self.kept[index] = span.model_copy(update={"turn": turn})
        self.kept.sort(key=lambda s: (s.start_unix_nano, s.end_unix_nano))
        started: dict[str, int] = {}
        for at, turn in starts:
            started.setdefault(str(turn), at)
        return SpansFile(received=self.received, over_limit=self.received - len(self.kept),
                         max_spans=self.max_spans, turn_started_unix_nano=started, spans=self.kept,
                         not_found=self.not_found, clock_skew_ms=round(skew / 1e6, 3), incomplete=incomplete,
                         shared=[t for t in self.trace_ids if t in self.shared], other_spans=self.other_spans,
                         runs_alongside=self.alongside, **self._silence())

    def _silence(self) -> dict[str, object]:
        """`silent` (and `waited_s`) for spans.json: the run that found its agent silent, or waited less for it."""
        if self.agent is None or self._heard or not (self._silence_said or self._waited_short is not None):
            return {}
        return {"silent": self.agent.question(), "silent_said": self._silence_said, "waited_s": self._waited_short}


def heard_unasked(spans: RunSpans | None, turn: int, since_ns: int) -> None:
    """A turn the agent took unasked (its greeting, more words a `wait_for` heard) began when tamesu started
    listening for it (`since_ns`, tamesu's clock): a conversation's spans from then are its, not the turn
    before's."""
    if spans is not None:
        spans.began(turn, since_ns)
