"""The contract every target implements, and the keys every conversational target shares."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import jsonpath
from pydantic import Field, model_validator

from tamesu.conversation import AgentTurn, FileRef, Session, UserTurn
from tamesu.errors import Problem, TemplateError
from tamesu.net.tls import TlsSpec
from tamesu.suite.schema import ConnectSpec, Duration, HttpRequestSpec, Strict
from tamesu.telemetry.traceparent import TraceContext, own_traceparent
from tamesu.types import YamlInt


class SessionOpenSpec(HttpRequestSpec):
    """A request made once per run before the target starts; its captures render as {{session.NAME}}."""

    method: str = "POST"
    capture: dict[str, str] = Field(default_factory=dict)
    """NAME: JSONPath into the response body."""


class SessionSpec(Strict):
    open: SessionOpenSpec | None = None
    """A request made once per run before the target connects (create a conversation, mint a token); its
    `capture` values are `{{session.NAME}}` in the target's configuration."""


class HandoffSpec(Strict):
    """How the agent signals that a person took over: a JSONPath that is truthy, or a pattern in its text."""

    json_path: str | None = None
    """A JSONPath into the agent's response that is truthy when a person took over."""
    regex: str | None = None
    """A regular expression on the agent's text that matches when a person took over."""
    to: str | None = None
    """JSONPath to who took over (a queue, a person)."""
    summary: str | None = None
    """JSONPath to the summary the agent handed over."""

    @model_validator(mode="after")
    def _checked(self) -> HandoffSpec:
        """Every target that reads a handoff (rest, grpc, model) gets it here, at load, as a suite problem:
        a bad path or pattern would otherwise only show in the first turn that reads it."""
        for key in ("json_path", "to", "summary"):
            path = getattr(self, key)
            if path is not None:
                try:
                    check_path(path)
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex: {exc}") from None
        return self


def check_path(path: str) -> str:
    """`path` if it is a JSONPath, else a ValueError whose message is one line naming it."""
    try:
        jsonpath.compile(path)
    except jsonpath.JSONPathError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"bad JSONPath {path!r}: {first_line}") from None
    return path


class TargetSpec(Strict):
    """Keys every target type accepts."""

    type: str
    description: str | None = None
    """What the agent is, for people: shown in reports."""
    connect: ConnectSpec = Field(default_factory=ConnectSpec)
    """How a request that never reached the agent is retried: `attempts`, `backoff`, `timeout`."""
    tls: TlsSpec | None = None
    """Trust and client certificates for the target's TLS routes (rest, a2a, mcp over HTTP, grpcs://, a voice,
    realtime or pipecat target's wss://): net.tls."""
    session: SessionSpec = Field(default_factory=SessionSpec)
    """`open`: a request made once per run before the target connects; its captures are `{{session.NAME}}`."""
    handoff: HandoffSpec | None = None
    """How the agent says a person took over (a JSONPath or a pattern): the conversation then ends with `handoff`."""
    turn_timeout: Duration = Field(60.0, gt=0)
    """How long one turn may wait for the agent's answer before it fails."""
    max_response_bytes: YamlInt = Field(default=4_000_000, ge=1024, le=2**31)
    """A turn's text and documents beyond this many bytes are cut, and the cut recorded (tamesu.targets.bounds)."""

    def streams_replies(self) -> bool:
        """Whether the agent's reply may be read in pieces as it comes (a stream, audio heard as it is said), so a
        run measures `time_to_first_token_ms`; False where the spec says its replies come whole (a model's answer,
        rest's `streaming: none`, A2A's message/send)."""
        return True

    def greeting_turns(self) -> int:
        """The agent's turns before the user's first that the spec says will come (a chat widget's `greeting`):
        a script of N turns makes N plus these."""
        return 0

    def declared_tools(self) -> list[str] | None:
        """Every tool the agent can call, as the spec declares them (a `model` target's `tools`), so a tool
        assertion naming another is refused where written; None where the agent's tools are its own or known only
        once it runs (an MCP server lists them as it opens)."""
        return None

    def fixed_addrs(self) -> frozenset[str]:
        """host:port addresses with a port the target binds as written (a listener's `addr`): two runs at once
        would fight for one, so the runner makes such runs one at a time."""
        return frozenset()


@dataclass(frozen=True)
class StepContext:
    """What `validate` knows around one test's `steps:`, for a type that takes them."""

    models: set[str]
    """The model names the suite and project configure."""
    problem_at: Callable[..., Problem]
    """`(loc, message)` -> a Problem at that place of the suite."""
    from_validation: Callable[..., list[Problem]]
    """`(ValidationError, model, loc)` -> its Problems."""
    has_conversation: bool
    suite_dir: Path
    target_name: str


SpecT = TypeVar("SpecT", bound=TargetSpec, covariant=True)
"""A target's own spec type: `class RestTarget(Target[RestSpec])` reads `self.spec` as a RestSpec; covariant, so
any target is a `Target[TargetSpec]` where only its spec's being a target spec matters."""


class Target(ABC, Generic[SpecT]):
    """One agent under test, reached over one transport. A target never imports the engine."""

    kind: ClassVar[str]
    Spec: ClassVar[type[TargetSpec]]
    conversational: ClassVar[bool] = True
    carries_history: ClassVar[bool] = False
    """Whether a turn's message history (a stateless test's earlier messages) reaches the agent with the turn.
    A case with a history against a target that cannot carry it is refused when it loads, never run on its
    last message alone."""

    # What the type can do, declared by each class (a plug-in's too); `validate` and the engine read these,
    # never type names.
    audio: ClassVar[bool] = False
    """It speaks audio, so a persona's voice and behaviours mean something."""
    text_mode: ClassVar[bool] = False
    """With `audio`: its spec's `mode` chooses, and only `mode: audio` speaks."""
    dtmf: ClassVar[bool] = False
    """Its protocol carries DTMF digits (a `dtmf` script step)."""
    dtmf_needs: ClassVar[str | None] = None
    """With `dtmf`: the spec key without which this configuration cannot send digits (`messages.dtmf`)."""
    takes_steps: ClassVar[bool] = False
    """A test of it may have `steps:` (browser actions), checked by `step_problems`."""
    answers_http_status: ClassVar[bool] = False
    """Each turn has an HTTP status (the `status` assertion)."""
    phone_call: ClassVar[bool] = False
    """Its session is a phone call (`call_ended_by`, `transferred_to`)."""
    hears_dtmf: ClassVar[bool] = False
    """The digits the agent sends on the line are heard (`dtmf_received`)."""
    hears_late: ClassVar[bool] = False
    """`listen` takes a late look (a timeout of 0 or less): a voice target whose speech-to-text can be behind the
    line hears what the agent said before a `wait_for`'s end, read after it."""
    signals_handoff: ClassVar[bool] = False
    """Its protocol says when a person took over, with or without the spec's `handoff:` (`handoff`)."""
    session_names: ClassVar[frozenset[str]] = frozenset()
    """The `{{session.NAME}}` values it fills itself (sip's `uri`), beside a `session.open`'s captures where its
    spec takes a `session` key; validate refuses any other name in its configuration."""
    opens_session: ClassVar[bool] = False
    """It makes the spec's `session.open` request itself, when its protocol needs it then (rest, voice, pipecat);
    for the others `open` makes it before `_open`, and the run's templates see its captures."""
    reads_handoff: ClassVar[bool] = False
    """It reads the spec's `handoff:` signal itself, from documents of its own (rest's streamed events); for
    the others the engine reads it from each turn as kept (`targets.handoff_signal`)."""
    metric_names: ClassVar[frozenset[str] | None] = None
    """The metrics it measures itself (`metrics()`, each turn's `measures`, what it counts on the session), besides
    those of every run (`plan._slo_names`); an audio target's include every audio call's (`audio.measured`). None
    when not declared (a plug-in's): a `defaults.slo` its tests may measure is then not checked before the run, only
    warned of after it."""
    not_measured: ClassVar[dict[str, str]] = {}
    """Metrics other targets of its kind measure and it does not, each with why (sip's `interruption_stop_ms`):
    said where an SLO or a `metric` assertion asks for one."""
    reports_tool_calls: ClassVar[bool] = True
    """Its protocol tells tamesu of tool calls, so tool assertions can see them (`validate` warns if not)."""
    takes_options: ClassVar[frozenset[str] | None] = frozenset()
    """The keys of a JSONL case's `options` (`-c` is `options.connector`) that reach the agent; None: all of
    them. `test` and `validate` warn of the others, which it drops."""

    @classmethod
    def offers(cls, need: str, spec: TargetSpec) -> bool:
        """Whether a target of this type, so configured, gives what a check `needs` (`Check.needs`)."""
        if need == "speaks_audio":
            return cls.has_audio(spec)
        return bool(getattr(cls, need, False)) or (need == "signals_handoff" and spec.handoff is not None)

    @classmethod
    def has_audio(cls, spec: object) -> bool:
        """Whether a target of this configuration speaks audio."""
        return cls.audio and (not cls.text_mode or getattr(spec, "mode", None) == "audio")

    @classmethod
    def sends_dtmf(cls, spec: object) -> bool:
        """Whether a target of this configuration can send digits."""
        if not cls.dtmf or cls.dtmf_needs is None:
            return cls.dtmf
        value: object = spec
        for part in cls.dtmf_needs.split("."):
            value = getattr(value, part, None)
        return value is not None

    @classmethod
    def step_problems(cls, steps: list[Any], loc: tuple[object, ...], spec: object,
                      context: StepContext) -> list[Problem]:
        """What is wrong with a test's `steps:` (none written: whether the type needs some) for a target of
        this configuration; asked of a type with `takes_steps` only."""
        return []

    @classmethod
    def unavailable(cls) -> str | None:
        """One line saying what to install when this target's optional packages are missing (a suite error)."""
        return None

    def __init__(self, spec: SpecT, name: str) -> None:
        self.spec: SpecT = spec
        self.name = name
        self._session: Session | None = None

    @property
    def _what(self) -> str:
        """How the target names itself in error lines: `rest target shop`."""
        return f"{self.kind} target {self.name}"

    async def open(self, session: Session) -> None:
        """Connect, read what describes the agent, make the session.open request. A failed open is closed at
        once, so nothing it started outlives it."""
        self._session = session
        try:
            opening = self.spec.session.open
            if opening is not None and not type(self).opens_session:
                from tamesu.targets.session_open import mask_credentials, open_session

                await open_session(opening, session, self._what)
                session.context = session.with_captures()
                mask_credentials(session, getattr(self.spec, "headers", None) or {}, opening.capture)
            await self._open(session)
        except BaseException:
            await self.close()
            raise

    @abstractmethod
    async def _open(self, session: Session) -> None:
        """What opening means for this target."""

    async def greeting(self) -> AgentTurn | None:
        """What the agent says before the user says anything (a phone agent's welcome), or None when the
        user speaks first. Called once, after open."""
        return None

    def greets_first(self) -> bool:
        """Whether `greeting()` is (was) the agent's first turn: the engine names a failure there "turn 1
        (the agent's greeting)" only then, and "before the first turn" otherwise."""
        return type(self).greeting is not Target.greeting

    def never_connected(self) -> str | None:
        """Why this session opened but never reached the agent, as an outcome a test may expect and assert
        (a phone call that was busy or unanswered), or None. Without an assertion that grades that outcome
        (a check with `grades_unconnected`), the test fails with this line."""
        return None

    @abstractmethod
    async def send(self, turn: UserTurn) -> AgentTurn:
        """Send one user turn and return the agent's turn. Raises TurnError or InfraError."""

    async def listen(self, timeout: float) -> AgentTurn | None:
        """The agent's next utterance without the user saying anything (a `wait_for` still listening), its
        start waited for at most `timeout` seconds (longer than `turn_timeout` too, which bounds the utterance
        once it started); None when it said nothing in that time, or when this target hears the agent only in
        answer to a turn (the default). Raises TurnError as `send` does.

        A `timeout` of 0 or less (asked only of a target that `hears_late`) is a late look: the wait's end passed
        that many seconds ago, while tamesu transcribed the utterance before; the utterance that began before the
        end (already heard, not yet read) is the agent's next, None when there is none."""
        return None

    @abstractmethod
    async def close(self) -> None:
        """Hang up and release everything; safe to call twice, and after a failed open."""

    def turn_trace_id(self, session: Session) -> str | None:
        """The trace id the agent got with the turn just sent (or failed), recorded with it: by default the
        turn's own, which every request of a turn carries. A target whose turns have no carrier of their own
        says the conversation's (what its handshake carried), or None when nothing carried one. A
        `traceparent` among the spec's `headers` is what the agent got instead (the suite's own wins): its
        trace id, or None when it is no W3C traceparent tamesu can read."""
        headers = getattr(self.spec, "headers", None)
        # most suites set no headers: asked every turn, an empty dict is not searched (nor ABC-checked)
        own = own_traceparent(headers) if headers and isinstance(headers, dict | Mapping) else None
        if own is not None:
            try:
                parsed = TraceContext.parse(session.with_captures().render_text(own))
            except TemplateError:
                return None
            return parsed.trace_id if parsed is not None else None
        return session.trace.trace_id if session.trace is not None else None

    def metrics(self) -> dict[str, float]:
        """Metrics only this target type knows (counters it kept); the engine adds the common ones."""
        return {}

    @classmethod
    def file_refusal(cls, spec: object, file: FileRef, models: Mapping[str, object]) -> str | None:
        """Why this target cannot carry a user's file to its agent, or None when it can. Asked when a test
        loads, so a case with a file the agent would never get is refused, not run without it. `models` are
        the project's models (the model target's provider decides). A target type says so only once it
        really sends files: until then, none."""
        return f"a {cls.kind} target cannot carry files"

    def _require_session(self) -> Session:
        if self._session is None:
            raise RuntimeError(f"{self._what} is not open")
        return self._session
