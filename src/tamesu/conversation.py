"""The things a conversation is made of, shared by targets, checks and the engine.

Times are milliseconds on the monotonic clock since the session opened, taken where the bytes move.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, Field

from tamesu.models.base import Models
from tamesu.suite.secrets import Redactor
from tamesu.suite.templates import Context
from tamesu.telemetry.traceparent import TraceContext

WRITE_GOLDEN = "run with --update-golden to write it"
"""What a missing golden file or baseline tells to do, where the run has `--update-golden` (`tamesu run`, `tamesu
test`); the pytest plug-in, which has no such option, says the command that has it (`RunOptions.write_golden`)."""

if TYPE_CHECKING:  # the suite schema imports this module
    from tamesu.suite.fuzz import FuzzSpec
    from tamesu.suite.schema import Persona


class FileRef(BaseModel):
    """A file a user turn carries: bytes from a path, or a URI the agent fetches."""

    name: str
    mime: str = "application/octet-stream"
    path: str | None = None
    uri: str | None = None


class HistoryMessage(BaseModel):
    """One earlier message of a conversation that travels with a user turn (a stateless test's history)."""

    role: Literal["user", "assistant", "system"]
    content: str = ""
    files: list[FileRef] = Field(default_factory=list)


class UserTurn(BaseModel):
    text: str = ""
    data: Any = None
    files: list[FileRef] = Field(default_factory=list)
    dtmf: str | None = None
    """Keypad digits the user presses with (or instead of) saying `text`, sent the way the target's protocol
    does (RFC 4733 on sip); only targets that carry DTMF accept a `dtmf` step."""
    source: Literal["script", "simulator", "counterpart", "static", "goal", "human", "step"] = "script"
    history: list[HistoryMessage] = Field(default_factory=list)
    """The conversation before this turn, when the test gives it instead of playing it (JSONL `input` as a
    message list). A target that keeps no history of its own sends it with the turn: the model target as
    messages before this one, the rest target as `{{messages}}` and in its default body."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Per-test settings for the target (JSONL `options`: connector, mode, metadata...); rest shows them as
    `{{options.X}}`; an A2A target may send `metadata` as message metadata."""

    def display(self) -> str:
        """How the turn reads in a transcript: words, keys pressed as [dtmf 2], data as JSON, files as [name]."""
        parts = [self.text] if self.text else []
        if self.dtmf:
            parts.append(f"[dtmf {self.dtmf}]")
        if self.data is not None:
            parts.append(json.dumps(self.data, ensure_ascii=False, sort_keys=True))
        if self.files:
            parts.extend(f"[{f.name}]" for f in self.files)
        return "\n".join(parts)

    def messages(self) -> list[dict[str, Any]]:
        """The history and this turn as `{role, content}` messages, this turn last."""
        earlier = [{"role": m.role, "content": _with_files(m.content, m.files)} for m in self.history]
        return [*earlier, {"role": "user", "content": self.display()}]


def _with_files(text: str, files: list[FileRef]) -> str:
    return "\n".join([text, *(f"[{f.name}]" for f in files)]) if files else text


class ToolCall(BaseModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    kind: Literal["tool", "delegation"] = "tool"
    turn: int | None = None


class Handoff(BaseModel):
    """The agent handed the conversation to a person."""

    to: str | None = None
    summary: str | None = None


def _unset(value: bool) -> bool:
    """A flag left out of the file when false: every reply not cut reads as it did."""
    return not value


class TurnAudio(BaseModel):
    """The audio of one exchange on the session's timeline (ms), for audio targets: what the user said and
    when it was sent, when the agent's reply played (on the playback clock), and what each side heard."""

    said: str = ""
    """The text tamesu synthesised for the user."""
    voice: str | None = None
    user_from_ms: float | None = None
    user_to_ms: float | None = None
    """The user's speech end: the last frame sent (an audio commit follows it at once)."""
    agent_heard_user: str | None = None
    """The agent's own transcript of the user's speech, where the protocol reports one."""
    agent_from_ms: float | None = None
    agent_to_ms: float | None = None
    agent_said: str | None = None
    """What tamesu's speech-to-text heard in the agent's audio."""
    agent_said_cut: bool = Field(False, exclude_if=_unset)
    """Whisper's decoding of the reply stopped at its token bound (`tamesu.audio.stt.token_bound`), not at the end of
    what was said: `agent_said` may repeat a phrase it looped on, and misses what followed. Written only when true."""
    agent_audio_ms: float = 0.0
    """How much agent audio this reply played."""
    interrupted_at_ms: float | None = None
    """The user talked over this reply from here (a persona's `interrupt_probability`)."""
    agent_stopped_at_ms: float | None = None
    """After that barge-in, when the agent's audio stopped."""
    untranscribed_ms: float | None = None
    """The reply's speech heard but not transcribed when its turn's text was taken (a `wait_for`'s timeout came
    first): the text has none of it; `agent_said` may have it, transcribed once the call was over."""
    barge_in_due_ms: float | None = None
    """When the persona's behaviour had it talk over this reply (its first speech and the delay drawn):
    `interrupted_at_ms` later than this is how late the barge-in started (`barge_in_late_ms`)."""


class AgentTurn(BaseModel):
    text: str = ""
    response: Any = None
    """The document `json_path` reads: the response body, or the final state of a streamed turn."""
    raw: list[Any] = Field(default_factory=list)
    """Every raw response or streamed event of the turn, in order."""
    status: int | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    sent_at_ms: float = 0.0
    first_token_at_ms: float | None = None
    completed_at_ms: float = 0.0
    ended: bool = False
    """The agent ended the conversation."""
    handoff: Handoff | None = None
    trace_id: str | None = None
    """The W3C trace id the agent got with the turn (`traceparent`), to find the agent's own trace: the turn's
    own, or the conversation's when only the connection's handshake carried one (tamesu.telemetry.traceparent)."""
    audio: TurnAudio | None = None
    """Audio targets: the exchange's speech on the timeline (transcript.json shows it)."""
    spoken: bool = False
    """The text is what was heard in the agent's audio: `wait_for`, `contains`, `regex` and captures match it
    as speech (tamesu.speech) unless told `match: exact`."""
    measures: dict[str, float] = Field(default_factory=dict)
    """Per-turn metrics a target measured (`time_to_first_audio_ms`, `interruption_stop_ms`): the engine
    makes each a distribution with `_p50`, `_p95`, `_max`, as it does `turn_latency_ms`."""

    @property
    def latency_ms(self) -> float:
        return self.completed_at_ms - self.sent_at_ms

    @property
    def first_token_ms(self) -> float | None:
        if self.first_token_at_ms is None:
            return None
        return self.first_token_at_ms - self.sent_at_ms


@dataclass
class Exchange:
    """One agent turn and the user turn it answered (index from 1)."""

    index: int
    user: UserTurn | None
    agent: AgentTurn


class Event(BaseModel):
    name: str
    at_ms: float
    data: dict[str, Any] = Field(default_factory=dict)


class TimeGiven(TypedDict):
    """What a turn that timed out was given (TurnError's `limit_s`, `started_at_ms`)."""

    limit_s: float
    started_at_ms: float


def given_since(limit_s: float, since: float, now_ms: float) -> TimeGiven:
    """`limit_s` given from `since` (a time.monotonic()), placed on the session's clock by its `now_ms`."""
    return {"limit_s": limit_s, "started_at_ms": now_ms - (time.monotonic() - since) * 1000}


class TurnError(Exception):
    """The agent answered a turn with an error it owns (a protocol error, a 5xx): the run fails."""

    def __init__(self, message: str, raw: object = None, status: int | None = None, *, limit_s: float | None = None,
                 started_at_ms: float | None = None, events: bool = False) -> None:
        super().__init__(message)
        self.raw = raw
        self.events = events
        """`raw` is the turn's documents in order (a stream's events, posts, polls), kept as a streamed turn keeps
        them (`raw` each, `response` the last), not one answer."""
        self.status = status
        self.tool_calls: list[ToolCall] = []
        """The calls the agent made in the turn before it failed: the failed turn keeps them."""
        self.limit_s = limit_s
        """A turn that timed out: the time it was given, which its recorded time does not exceed (giving up and
        cleaning up after it take longer)."""
        self.started_at_ms = started_at_ms
        """When that time started, if not when the engine sent the turn (a voice turn's, at the end of the user's
        words)."""


class Session:
    """One run's live state that a target may read and write: its timeline, templates and artifacts."""

    def __init__(
        self,
        *,
        context: Context,
        artifacts_dir: Path,
        redactor: Redactor,
        run_id: str,
        base_dir: Path,
        models: Models | None = None,
        fuzz_tools: Mapping[str, FuzzSpec] | None = None,
        remote_agents: Iterable[str] = (),
        persona: Persona | None = None,
        seed: int = 0,
    ) -> None:
        self._origin = time.monotonic()
        self.context = context
        self.artifacts_dir = artifacts_dir
        self.redactor = redactor
        self.run_id = run_id
        self.base_dir = base_dir
        """The folder of the suite, against which relative paths resolve."""
        self.events: list[Event] = []
        self.values: dict[str, object] = {}
        """Values captured by `session.open`, seen as `{{session.NAME}}`."""
        self.counters: dict[str, float] = {}
        self.models = models
        """The run's models (for targets driven by a model: model, mcp); None when none are configured."""
        self.fuzz_tools: dict[str, FuzzSpec] = dict(fuzz_tools or {})
        """The test's `fuzz_tools`: the tools (and remote agents) that misbehave on purpose in this run."""
        self.remote_agents: frozenset[str] = frozenset(remote_agents)
        """The names of the suite's remote agents: `fuzz_tools` names them beside the target's own tools."""
        self.trace: TraceContext | None = None
        """The trace of the turn being sent: targets send its `traceparent` with every request of the turn
        (None between turns)."""
        self.in_flight: tuple[int, UserTurn, float] | None = None
        """The user turn being answered (its number, the turn, when it was sent): the one a test's timeout cuts
        short has no exchange, yet result.json and the transcript show it (None between turns)."""
        self.in_flight_trace: str | None = None
        """The trace id the agent got with the turn in flight, known once its send ended, cut short or not: the
        turn a test's timeout cut short links its trace as an answered one does."""
        self._conversation_trace: TraceContext | None = None
        self.conversation_trace_factory: Callable[[], TraceContext] | None = None
        """How the engine starts the conversation's trace (with OpenTelemetry, a span) the first time a target
        asks for `conversation_trace`: only targets that connect before their first turn do."""
        self.update_golden = False
        """`--update-golden`: targets that compare with baselines (the browser's `visual`) write them instead."""
        self.write_golden = WRITE_GOLDEN
        """How a baseline not there is told to be written (`WRITE_GOLDEN`, or the pytest plug-in's words)."""
        self.persona: Persona | None = persona
        """Who plays the user: audio targets speak with its `voice` and act out its `behaviors`."""
        self.seed = seed
        """The run's seed: behaviours (when to interrupt, how long to pause) repeat with it."""
        self.runs_going: Callable[[], int] = lambda: 1
        """How many test runs are going now, this one included (the engine's count, not `--parallel`): a rate
        limit's line advises fewer only above 1."""
        self.greeting_wait_s: float | None = None
        """How long the user side waits for the agent's first words from the greeting's start (a script's first
        `wait_for`): an audio target's greeting is transcribed within it, what is not being said as cut."""
        self.next_words: Callable[[], str | None] | None = None
        """The user side's next words when they are known before the agent answers (a script's next `say`, a
        case's next static turn), else None: an audio target synthesises them ahead, so a persona that talks
        over a reply starts when its behaviour drew, not once its words are synthesised."""
        self.reads_reply: Callable[[], bool] | None = None
        """Whether anything reads the words of the agent's reply being heard now while the call goes on (the user
        side's next step, a capture, a handoff signal, a cut at `max_response_bytes`); None: something may. An
        audio target transcribes a reply nothing reads once the call is over, with the others, not during it."""

    @property
    def conversation_trace(self) -> TraceContext | None:
        """The trace of the whole conversation (one per test run), for what a target sends before or between
        turns: a handshake carries this `traceparent` (tamesu.telemetry.traceparent). Started on first use."""
        if self._conversation_trace is None and self.conversation_trace_factory is not None:
            self._conversation_trace = self.conversation_trace_factory()
        return self._conversation_trace

    @conversation_trace.setter
    def conversation_trace(self, trace: TraceContext | None) -> None:
        self._conversation_trace = trace

    def with_captures(self) -> Context:
        """The run's templates with `session.open`'s captures as `{{session.NAME}}`."""
        return self.context.child(session=dict(self.values))

    def now_ms(self) -> float:
        return (time.monotonic() - self._origin) * 1000.0

    def event(self, name: str, /, **data: object) -> Event:
        recorded = Event(name=name, at_ms=self.now_ms(), data=data)
        self.events.append(recorded)
        return recorded

    def count(self, metric: str, by: float = 1) -> None:
        self.counters[metric] = self.counters.get(metric, 0) + by
