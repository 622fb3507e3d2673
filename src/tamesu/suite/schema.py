"""The pydantic models of everything a user writes in a suite or in `tamesu.yaml`.

Targets and assertions are validated by the module that owns each type (see `tamesu.targets` and
`tamesu.checks`), so here they stay raw mappings; the loader dispatches them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tamesu.models.spec import BudgetSpec, CacheSpec, ModelSpec
from tamesu.packs import PackSpec
from tamesu.suite.audio_names import NOISES
from tamesu.suite.caller_packs import expand
from tamesu.suite.fuzz import FuzzSpec
from tamesu.suite.remote_agents import RemoteAgentSpec
from tamesu.suite.templates import references
from tamesu.types import Duration, Strict, parse_duration, split_addr

__all__ = ["Duration", "Strict", "parse_duration"]

class ConnectSpec(Strict):
    """How a request that never reached the agent is retried."""

    attempts: int = Field(3, ge=1, le=100)
    backoff: Duration = 0.5
    timeout: Duration = 10.0


class HttpRequestSpec(Strict):
    url: str
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    timeout: Duration = 30.0
    expect_status: list[int] | int | None = None


class HookSpec(Strict):
    """A command (`run`) or an HTTP request (`http`) run around tests."""

    run: str | None = None
    http: HttpRequestSpec | None = None
    timeout: Duration = 60.0
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"run": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_kind(self) -> HookSpec:
        if (self.run is None) == (self.http is None):
            raise ValueError("a hook is either run: <command> or http: {url, ...}")
        return self


class HooksSpec(Strict):
    before_all: list[HookSpec] = Field(default_factory=list)
    after_all: list[HookSpec] = Field(default_factory=list)
    before_each: list[HookSpec] = Field(default_factory=list)
    after_each: list[HookSpec] = Field(default_factory=list)


class NoiseSpec(Strict):
    name: str
    level_db: float = Field(-20.0, le=20, ge=-80)
    """The noise's loudness relative to the speech (-20: 20 dB quieter than the voice)."""
    between: bool = False
    """Also on the open line between the user's utterances (targets that keep the line open: twilio, voice,
    pipecat and livekit audio, realtime with server VAD), not only under its speech."""

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in NOISES:
            raise ValueError(f"unknown background noise {name!r} (one of {', '.join(NOISES)})")
        return name


class Behaviors(Strict):
    """How the simulated user behaves on an audio target (`tamesu.audio.behaviors`)."""

    interrupt_probability: float | None = Field(None, ge=0, le=1)
    silence_after_turn_ms: list[int] | int | None = None
    """Pause before the user speaks after the agent's reply: [min, max] drawn per turn, or one number."""
    background_noise: NoiseSpec | None = None
    """A named noise (`cafe`, or `{name: cafe, level_db: -25}`) mixed under the user's speech."""
    speaking_rate: float | None = Field(None, ge=0.5, le=2.0)
    """How fast the user talks against the voice's own pace (1.5: half again as fast)."""
    volume_db: float | None = Field(None, ge=-40, le=10)
    """The user's speech this many dB louder, or quieter when negative (a quiet caller: -20)."""
    disfluency: float | None = Field(None, ge=0, le=1)
    """The chance, per utterance and seeded per run, that the user hesitates ("um") and restarts its first
    words ("I want- I want a table")."""
    spell_out: bool = False
    """Numbers and codes read digit by digit: "ORD-1001" is said "O R D one zero zero one"."""

    @model_validator(mode="before")
    @classmethod
    def _pack(cls, value: Any) -> Any:
        return expand(value)

    @field_validator("background_noise", mode="before")
    @classmethod
    def _noise_shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @field_validator("silence_after_turn_ms")
    @classmethod
    def _range(cls, value: list[int] | int | None) -> list[int] | int | None:
        values = value if isinstance(value, list) else [] if value is None else [value]
        if isinstance(value, list) and len(value) != 2:
            raise ValueError("silence_after_turn_ms is [min, max] or one number of milliseconds")
        if any(v < 0 or v > 60000 for v in values):
            raise ValueError("silence_after_turn_ms values are 0 to 60000 ms")
        return value


class Persona(Strict):
    name: str = "User"
    style: str | None = None
    language: str | None = None
    voice: str | None = None
    background: str | None = None
    behaviors: Behaviors = Field(default_factory=Behaviors)
    facts: dict[str, str] = Field(default_factory=dict)
    """What is true of this user (`booking_ref: ABC123`): the simulated user is told them, and a line of
    its that names a fact with another value is the simulated user's fault, not the agent's."""


class FileSpec(Strict):
    path: str | None = None
    uri: str | None = None
    name: str | None = None
    mime: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"uri": value} if re.match(r"^[a-z][a-z0-9+.-]*://", value) else {"path": value}
        return value

    @model_validator(mode="after")
    def _one_source(self) -> FileSpec:
        if (self.path is None) == (self.uri is None):
            raise ValueError("a file is a path relative to the suite or a uri")
        return self


SpeechMatch = Literal["speech", "exact"]
"""How text is matched on an audio turn: as a listener hears speech (tamesu.speech), or exactly as written."""


class ScriptStep(Strict):
    say: str | None = None
    data: Any = None
    files: list[FileSpec] = Field(default_factory=list)
    wait_for: str | None = None
    timeout: Duration | None = None
    """How long a `wait_for` keeps listening for its phrase across the agent's utterances (default 15s)."""
    match: SpeechMatch = "speech"
    similarity: float = Field(0.8, gt=0, le=1)
    """`wait_for` on an audio turn: the share of the phrase's words that must be heard (tamesu.speech)."""
    dtmf: str | None = None

    @model_validator(mode="after")
    def _something(self) -> ScriptStep:
        if self.say is None and self.data is None and not self.files and self.wait_for is None and not self.dtmf:
            raise ValueError("a script step needs say, data, files, wait_for or dtmf")
        if self.wait_for is None and ({"timeout", "match", "similarity"} & self.model_fields_set):
            raise ValueError("timeout, match and similarity belong to a wait_for step")
        return self


class Scenario(Strict):
    goal: str | None = None
    max_turns: int = Field(10, ge=1, le=1000)
    stop_when: str | None = None
    script: list[ScriptStep] = Field(default_factory=list)
    attack: str | None = Field(None, min_length=1)
    """A red-team pack (`prompt_injection`, `jailbreak`...) whose `attack:` the simulated user plays after the
    script; `goal` becomes its cover story, and the pack grades the test unless `assert` names it already."""


class Quarantine(Strict):
    reason: str = Field(min_length=1)
    until: dt.date | None = None

    def active(self, today: dt.date) -> bool:
        return self.until is None or today <= self.until


class Case(Strict):
    name: str = Field(min_length=1)
    vars: dict[str, Any] = Field(default_factory=dict)


class CaptureSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    regex: str | None = None
    json_path: str | None = None
    extract: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> CaptureSpec:
        given = [k for k in ("regex", "json_path", "extract") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a capture takes exactly one of regex, json_path or extract")
        return self


class AdaptiveSpec(Strict):
    """`adaptive:` stop repeating as soon as the `pass_threshold` verdict is decided at `confidence`."""

    confidence: float = Field(0.95, ge=0.5, le=0.999)
    min_runs: int = Field(5, ge=1, le=10000)


class Defaults(Strict):
    assert_: list[Any] = Field(default_factory=list, alias="assert")
    slo: dict[str, float] = Field(default_factory=dict)
    adaptive: AdaptiveSpec | None = None
    """Adaptive repeats for every test that repeats and does not say `adaptive:` itself."""


class CounterpartSpec(Strict):
    """`counterpart:` another target of the suite plays the user (two agents talking)."""

    target: str = Field(min_length=1)
    opening: str | None = None
    """The first user turn; without it the counterpart's answer to `scenario.goal` is."""


class TestSpec(Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    target: str
    tags: list[str] = Field(default_factory=list)
    persona: Persona | None = None
    scenario: Scenario = Field(default_factory=Scenario)
    assert_: list[Any] = Field(default_factory=list, alias="assert")
    repeat: int = Field(1, ge=1, le=10000)
    pass_threshold: float = Field(1.0, ge=0.0, le=1.0)
    retries: int = Field(0, ge=0, le=20)
    pass_k: list[int] = Field(default_factory=list)
    """The k of pass@k and pass^k in the test's statistics; default 1 and the number of runs."""
    adaptive: AdaptiveSpec | None = None
    """Stop repeating once the verdict is decided (`repeat` is then the most runs)."""
    retries_inconclusive: int = Field(2, ge=0, le=20)
    """How often a run the simulated user spoiled is run again with a new seed."""
    quarantine: Quarantine | None = None
    skip: str | bool = False
    vars: dict[str, Any] = Field(default_factory=dict)
    cases: list[Case] = Field(default_factory=list)
    cases_file: str | None = None
    capture: list[CaptureSpec] = Field(default_factory=list)
    timeout: Duration = 300.0
    fuzz_tools: dict[str, FuzzSpec] = Field(default_factory=dict)
    """Tools (and remote agents) that misbehave on purpose in this test: name: error|empty|hostile|delay|custom."""
    counterpart: CounterpartSpec | None = None
    """Another target of the suite in the user's seat instead of a persona."""
    steps: list[dict[str, Any]] = Field(default_factory=list)
    """A browser test: `goal`, `expect` and `action` steps, in order (validated by the browser target)."""

    __test__ = False  # not a pytest class

    @field_validator("pass_k")
    @classmethod
    def _positive_ks(cls, ks: list[int]) -> list[int]:
        if any(k < 1 for k in ks):
            raise ValueError("every k of pass_k is 1 or more")
        return ks

    @model_validator(mode="after")
    def _adaptive_fits(self) -> TestSpec:
        if self.adaptive is not None and self.adaptive.min_runs > self.repeat:
            raise ValueError(f"adaptive.min_runs ({self.adaptive.min_runs}) is more than repeat ({self.repeat})")
        return self


class SecretsSpec(Strict):
    env_files: list[str] = Field(default_factory=lambda: [".env"])


class TraceQuerySpec(Strict):
    """`traces.query`: the tracing backend the agent already exports to, asked for each turn's trace."""

    jaeger: str | None = None
    """Jaeger's query service (`http://host:16686`): `GET /api/traces/{traceId}`, Jaeger's JSON."""
    tempo: str | None = None
    """Tempo's HTTP API (`http://host:3200`): `GET /api/traces/{traceId}`, OTLP JSON."""
    timeout: Duration = Field(5.0, gt=0)
    """How long one request to the backend may take; a backend that does not answer is an error (exit 3)."""

    @model_validator(mode="after")
    def _one_backend(self) -> TraceQuerySpec:
        if (self.jaeger is None) == (self.tempo is None):
            raise ValueError("name one backend: { jaeger: URL } or { tempo: URL }")
        url = self.jaeger or self.tempo or ""
        if not re.match(r"^https?://[^/\s]+", url):
            raise ValueError(f"the backend's URL must start with http:// or https://, got {url[:80]!r}")
        return self

    @property
    def backend(self) -> tuple[str, str]:
        """(kind, base URL without a trailing slash)."""
        return ("jaeger", self.jaeger.rstrip("/")) if self.jaeger else ("tempo", (self.tempo or "").rstrip("/"))


class TracesSpec(Strict):
    """`traces:`: the agent's own OpenTelemetry spans, received while the tests run or fetched from the agent's
    tracing backend after each run (tamesu.telemetry)."""

    receive: str | None = None
    """`host:port` of an OTLP/HTTP receiver (protobuf and JSON) for the run's duration; port 0 picks a free one.
    `{{env.NAME}}` templates are filled in when the run starts (a port a CI job or a script chose).
    Hooks and the commands tamesu starts get OTEL_EXPORTER_OTLP_ENDPOINT pointing at it."""
    query: TraceQuerySpec | None = None
    """Instead of `receive`: fetch each turn's trace from Jaeger or Tempo once the run's turns had `wait`."""
    wait: Duration = 2.0
    """How long after a run's last turn to wait for late spans before it is graded; with `query`, also how
    long a trace the backend does not have yet is asked for again."""
    max_spans: int = Field(10_000, ge=1, le=10_000_000)
    """Spans kept per run; more are counted in the result, not kept."""

    @model_validator(mode="after")
    def _one_source(self) -> TracesSpec:
        if (self.receive is None) == (self.query is None):
            raise ValueError("traces: name where spans come from: receive: host:port, or query: "
                             "{ jaeger: URL } / { tempo: URL }")
        return self

    @field_validator("receive")
    @classmethod
    def _addr(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "{{" not in value:
            split_addr(value)
            return value
        for expr, problem in references(value):
            if problem:
                raise ValueError(problem)
            if not expr.startswith("env."):
                raise ValueError(f"only {{{{env.NAME}}}} templates are filled in here, not {{{{{expr}}}}}")
        return value


class SuiteSpec(Strict):
    name: str | None = None
    description: str | None = None
    targets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    defaults: Defaults = Field(default_factory=Defaults)
    hooks: HooksSpec = Field(default_factory=HooksSpec)
    vars: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    """`simulator`, `judge`, `extract`, or any name an assertion's `model:` refers to."""
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    packs: dict[str, PackSpec] = Field(default_factory=dict)
    """The suite's own packs, used as `pack: NAME`; they replace the project's and built-in ones of that name."""
    remote_agents: dict[str, RemoteAgentSpec] = Field(default_factory=dict)
    """Scripted A2A agents served for every run of the suite's tests, for the agent under test to delegate to."""
    traces: TracesSpec | None = None
    """The project's `traces:` for this suite's tests, or its own."""
    tests: list[dict[str, Any]] = Field(default_factory=list)


class ReportSettings(Strict):
    """`report:` in tamesu.yaml: the reports every `tamesu run` writes, as `--report` would name them."""

    formats: list[str] = Field(default_factory=lambda: ["html"])
    """`junit:reports/junit.xml`, `html`, `github`...; a path is relative to tamesu.yaml. The loader checks the
    names against the report formats (built-in and plug-ins). Default: the HTML report in the run folder (small,
    and the run ends with its path); `report: []` writes none."""
    baseline: str | None = None
    """An earlier run directory, or a folder of runs (its newest other run), to compare with."""
    tolerance: float = Field(0.2, ge=0)
    """A metric change smaller than this fraction of the baseline's value is not reported."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        return {"formats": value} if isinstance(value, list) else value


class ProjectSpec(Strict):
    """`tamesu.yaml`: what every suite of a project shares."""

    suites: list[str] = Field(default_factory=lambda: ["suites/*.yaml", "**/*.tamesu.yaml"])
    targets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Agents named for `tamesu test -n NAME` (JSONL tests); the same shape as a suite's `targets`."""

    @field_validator("suites", mode="before")
    @classmethod
    def _nothing_written(cls, value: Any) -> Any:
        # `suites:` with nothing after it names no suite, as `suites: []` does: the loader says so at the key
        return [] if value is None else value
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    packs: dict[str, PackSpec] = Field(default_factory=dict)
    """Packs every suite of the project may use as `pack: NAME`."""
    cache: CacheSpec = Field(default_factory=CacheSpec)
    defaults: Defaults = Field(default_factory=Defaults)
    hooks: HooksSpec = Field(default_factory=HooksSpec)
    secrets: SecretsSpec = Field(default_factory=SecretsSpec)
    vars: dict[str, Any] = Field(default_factory=dict)
    out: str = "tamesu-runs"
    parallel: int = Field(1, ge=1, le=10000)
    report: ReportSettings = Field(default_factory=ReportSettings)
    store: str | bool | None = None
    """The results store: unset or `true` (SQLite in .tamesu/store.db, the default), a SQLite path,
    `postgresql://...`, or `false` (off). TAMESU_STORE overrides it (an empty TAMESU_STORE is unset)."""
    traces: TracesSpec | None = None
    """Receive the agent's spans (OTLP/HTTP) for every suite that does not say otherwise."""
    trace_url: str | None = None
    """A link to the agent's own trace of a turn, such as `http://localhost:16686/trace/{trace_id}`."""
    yao_errors: bool = False
    """JSONL cases (`tamesu test`) follow the agent test design's error classes, as `--yao-errors` asks."""
