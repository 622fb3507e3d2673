"""The pydantic models of everything a user writes in a suite or in `tamesu.yaml`.

Targets and assertions are validated by the module that owns each type (see `tamesu.targets` and
`tamesu.checks`), so here they stay raw mappings; the loader dispatches them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import ClassVar, Literal

import jsonpath
from pydantic import ConfigDict, Field, field_validator, model_validator

from tamesu.models.spec import BudgetSpec, CacheSpec, ModelMap
from tamesu.packs import PackSpec
from tamesu.suite.audio_names import NOISES
from tamesu.suite.caller_packs import PACKS, expand
from tamesu.suite.connect_spec import ConnectSpec
from tamesu.suite.fuzz import FuzzSpec
from tamesu.suite.hooks_spec import HookSpec, HooksSpec, HttpRequestSpec
from tamesu.suite.load_spec import LoadSpec
from tamesu.suite.metric_ranges import unmeetable
from tamesu.suite.patterns import Pattern
from tamesu.suite.remote_agents import RemoteAgentSpec
from tamesu.suite.traces_spec import TraceQuerySpec, TracesSpec, checked_trace_url
from tamesu.types import Duration, Finite, HomePath, StoreSetting, Strict, TextOrBool, YamlBool, YamlFloat, YamlInt

__all__ = ["ConnectSpec", "Duration", "HookSpec", "HooksSpec", "HttpRequestSpec", "Strict", "TraceQuerySpec",
           "TracesSpec"]


class NoiseSpec(Strict):
    name: str
    """A background noise tamesu generates (`white`, `pink`, `brown`, `hum`, `cafe`, `street`, `office`), mixed under
    the simulated user's speech."""
    level_db: YamlFloat = Field(-20.0, le=20, ge=-80)
    """The noise's loudness relative to the speech (-20: 20 dB quieter than the voice)."""
    between: YamlBool = False
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

    interrupt_probability: YamlFloat | None = Field(None, ge=0, le=1)
    """The chance, per agent reply, that the simulated user talks over it (audio targets), after a random part of
    the reply; seeded per run."""
    silence_after_turn_ms: list[YamlInt] | YamlInt | None = None
    """Pause before the user speaks after the agent's reply: [min, max] drawn per turn, or one number."""
    background_noise: NoiseSpec | None = None
    """A named noise (`cafe`, or `{name: cafe, level_db: -25}`) mixed under the user's speech."""
    speaking_rate: YamlFloat | None = Field(None, ge=0.5, le=2.0)
    """How fast the user talks against the voice's own pace (1.5: half again as fast)."""
    volume_db: YamlFloat | None = Field(None, ge=-40, le=10)
    """The user's speech this many dB louder, or quieter when negative (a quiet caller: -20)."""
    disfluency: YamlFloat | None = Field(None, ge=0, le=1)
    """The chance, per utterance and seeded per run, that the user hesitates ("um") and restarts its first
    words ("I want- I want a table")."""
    spell_out: YamlBool = False
    """Numbers and codes read digit by digit: "ORD-1001" is said "O R D one zero zero one"."""
    pack: str | None = Field(None, exclude=True, json_schema_extra={"enum": list(PACKS)})
    """A caller pack whose behaviours this mapping starts from (its own keys win); read by `expand` before
    validation, so it is here for the schema only."""

    SHORTHAND_SCHEMA: ClassVar[dict[str, object]] = {"enum": list(PACKS), "description": "a caller pack"}

    @model_validator(mode="before")
    @classmethod
    def _pack(cls, value: object) -> object:
        return expand(value)

    @field_validator("background_noise", mode="before")
    @classmethod
    def _noise_shorthand(cls, value: object) -> object:
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
    """What the simulated user calls itself; the simulator's prompt names it."""
    style: str | None = None
    """How the user talks (`terse`, `angry and impatient`...): the simulator is told to write in it."""
    language: str | None = None
    """The language the user writes or speaks in (`German`, `es`)."""
    voice: str | None = None
    """On audio targets: the voice the user speaks with (a Piper voice or an espeak-ng variant; one not installed
    is a suite error that lists those that are); default Piper's shipped `en_US-joe-medium`, else `espeak:en-us`."""
    background: str | None = None
    """Who the user is and what happened before the conversation: told to the simulator as context."""
    behaviors: Behaviors = Field(default_factory=Behaviors)
    """Audio behaviours (interruptions, pauses, noise, pace, loudness, disfluency) or a pack of them; see the
    Behaviors table."""
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
    def _shorthand(cls, value: object) -> object:
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
    """The user's words for this turn; templates allowed."""
    data: object = None
    """Structured data sent with the turn (an A2A data part, a rest `{{data}}`); templates rendered in every string."""
    files: list[FileSpec] = Field(default_factory=list)
    """Files sent with the turn (a path relative to the suite, or `{uri, mime_type}`), to targets that take files."""
    wait_for: str | None = None
    """Instead of speaking: listen until the agent says this phrase (or `timeout` passes), then go on."""
    timeout: Duration | None = None
    """How long a `wait_for` keeps listening for its phrase across the agent's utterances (default 15s)."""
    match: SpeechMatch = "speech"
    """`speech`: on an audio turn, `wait_for` matches as a listener hears (case, punctuation, numbers and fillers
    aside); `exact`: the words as written."""
    similarity: YamlFloat = Field(0.8, gt=0, le=1)
    """`wait_for` on an audio turn: the share of the phrase's words that must be heard (tamesu.speech)."""
    dtmf: str | None = None
    """Keypad digits (0-9, *, #, A-D) to press on a phone target in this turn."""

    @field_validator("dtmf")
    @classmethod
    def _keypad(cls, digits: str | None) -> str | None:
        # a key no keypad has was dropped by the SIP client (and the digits before it) or sent as it was
        others = sorted({d for d in digits or "" if d not in "0123456789*#ABCDabcd"})
        if others:
            raise ValueError(f"dtmf holds keypad keys only (0-9, *, #, A-D), not {', '.join(map(repr, others))}")
        return digits

    @model_validator(mode="after")
    def _something(self) -> ScriptStep:
        if self.say is None and self.data is None and not self.files and self.wait_for is None and not self.dtmf:
            raise ValueError("a script step needs say, data, files, wait_for or dtmf")
        if self.wait_for is None and ({"timeout", "match", "similarity"} & self.model_fields_set):
            raise ValueError("timeout, match and similarity belong to a wait_for step")
        return self


class Scenario(Strict):
    goal: str | None = None
    """What the simulated user wants; the simulator plays towards it and ends the conversation once it is met."""
    max_turns: YamlInt = Field(10, ge=1, le=1000)
    """The most user turns in one run; a conversation still going then ends with `max_turns`."""
    stop_when: str | None = None
    """A condition, in words, that ends the conversation when the simulator judges it met (`the agent gives a refund
    amount`)."""
    script: list[ScriptStep] = Field(default_factory=list)
    """The user's turns written out, in order (`say`, `data`, `files`, `wait_for`, `dtmf`); with a `goal`, the
    simulator carries on after them."""
    attack: str | None = Field(None, min_length=1)
    """A red-team pack (`prompt_injection`, `jailbreak`...) whose `attack:` the simulated user plays after the
    script; `goal` becomes its cover story, and the pack grades the test unless `assert` names it already."""

    @model_validator(mode="after")
    def _every_scripted_turn(self) -> Scenario:
        # a script longer than the default max_turns was cut at 10 turns, quietly: its last steps never said, a
        # turn count failed as the agent's fault; written fewer, the suite asks for turns it would not take
        written = 0
        for step in self.script:  # a loop, not sum(): planning calls this for every test (issue 28's call count)
            if step.say is not None or step.data is not None or step.files or step.dtmf:
                written += 1
        if written <= self.max_turns:
            return self
        if "max_turns" not in self.model_fields_set:
            self.max_turns = written
        else:
            raise ValueError(f"max_turns {self.max_turns} is fewer than the {written} turns the script writes: the "
                             f"steps past turn {self.max_turns} would never be said (leave max_turns out, or raise it)")
        return self


class Quarantine(Strict):
    reason: str = Field(min_length=1)
    """Why the test is quarantined: it still runs, its failures do not fail the run."""
    until: dt.date | None = None
    """The last day of the quarantine (YYYY-MM-DD); after it, the test counts again and `validate` says so."""

    def active(self, today: dt.date) -> bool:
        return self.until is None or today <= self.until


class Case(Strict):
    name: str = Field(min_length=1)
    """The case's name: the test runs once per case as `NAME [case]`."""
    vars: dict[str, object] = Field(default_factory=dict)
    """The variables this case gives the test's templates (`{{vars.NAME}}`), over the test's and suite's."""


class CaptureSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The variable the captured value is stored as (`{{captured.NAME}}` in later turns and assertions)."""
    regex: Pattern | None = None
    """A regular expression run on the agent's text; the first group (or the whole match) is captured."""
    json_path: str | None = None
    """A JSONPath into the agent's raw response."""
    extract: str | None = None
    """A description in words; the `extract` model reads the value out of the agent's turn."""

    @field_validator("json_path")
    @classmethod
    def _a_json_path(cls, value: str | None) -> str | None:
        # one that cannot compile was each run's 'internal error' at the agent's first turn (exit 3)
        if value is None or "{{" in value:  # a var's: checked once filled in, per case
            return value
        try:
            jsonpath.compile(value)
        except jsonpath.JSONPathError as exc:
            raise ValueError(f"bad JSONPath {value!r}: {(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
        return value

    @model_validator(mode="after")
    def _one_source(self) -> CaptureSpec:
        given = [k for k in ("regex", "json_path", "extract") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a capture takes exactly one of regex, json_path or extract")
        return self


class AdaptiveSpec(Strict):
    """`adaptive:` stop repeating as soon as the `pass_threshold` verdict is decided at `confidence`."""

    confidence: YamlFloat = Field(0.95, ge=0.5, le=0.999)
    """How sure the verdict must be before the repeats stop (0.95: a 95% interval clear of `pass_threshold`)."""
    min_runs: YamlInt = Field(5, ge=1, le=10000)
    """Runs made before the verdict may stop the repeats."""


class Defaults(Strict):
    assert_: list[object] = Field(default_factory=list, alias="assert")
    """Assertions graded on every test's runs, before the test's own."""
    slo: dict[str, Finite] = Field(default_factory=dict)
    """Metric bounds (`turn_latency_ms_p95: 2000`) every test is held to."""
    adaptive: AdaptiveSpec | None = None
    """Adaptive repeats for every test that repeats and does not say `adaptive:` itself."""

    @field_validator("slo")
    @classmethod
    def _meetable(cls, slo: dict[str, float]) -> dict[str, float]:
        # each is a metric's `lte`: `llm_cost_usd: -1` would fail every test that measures it, the agent blamed
        for name, limit in slo.items():
            if (why := unmeetable(name, {"lte": limit})) is not None:
                raise ValueError(why)
        return slo


class CounterpartSpec(Strict):
    """`counterpart:` another target of the suite plays the user (two agents talking)."""

    target: str = Field(min_length=1)
    """The suite's target that plays the user: its answers are the user's turns."""
    opening: str | None = None
    """The first user turn; without it the counterpart's answer to `scenario.goal` is."""


class TestSpec(Strict):
    name: str = Field(min_length=1)
    """The test's name, unique in its suite."""
    description: str | None = None
    """What the test checks, for people: shown in reports."""
    target: str
    """The name of the suite's (or project's) target the test talks to; left out, the only one there is."""
    tags: list[str] = Field(default_factory=list)
    """Labels to select tests with (`tamesu run -t smoke`)."""
    persona: Persona | None = None
    """Who the simulated user is: name, style, language, voice, facts and behaviours."""
    scenario: Scenario = Field(default_factory=Scenario)
    """What the simulated user does: a goal, a script, when to stop."""
    assert_: list[object] = Field(default_factory=list, alias="assert")
    """The assertions graded on each run, after the suite's and project's `defaults.assert`."""
    repeat: YamlInt = Field(1, ge=1, le=10000)
    """How many times the test runs; the verdict comes from the pass rate of the runs."""
    pass_threshold: YamlFloat = Field(1.0, ge=0.0, le=1.0)
    """The share of runs that must pass for the test to pass (1.0: every run)."""
    retries: YamlInt = Field(0, ge=0, le=20)
    """How often a run that ended in an error (not a failure) is made again."""
    pass_k: list[YamlInt] = Field(default_factory=list)
    """The k of pass@k and pass^k in the test's statistics; default 1 and the number of runs."""
    adaptive: AdaptiveSpec | None = None
    """Stop repeating once the verdict is decided (`repeat` is then the most runs)."""
    retries_inconclusive: YamlInt = Field(2, ge=0, le=20)
    """How often a run the simulated user spoiled is run again with a new seed."""
    quarantine: Quarantine | None = None
    """A flaky test run but not counted: `{reason, until}`."""
    skip: TextOrBool = False
    """`true` or a reason: the test is not run and is reported as skipped."""
    vars: dict[str, object] = Field(default_factory=dict)
    """Variables for the test's templates (`{{vars.NAME}}`), over the suite's."""
    cases: list[Case] = Field(default_factory=list)
    """The test once per case, each with its own `vars`."""
    cases_file: str | None = None
    """A CSV file of cases (a header row with a `name` column; one row a case, the other columns as vars) or a
    JSON array of objects with `name`, relative to the suite."""
    capture: list[CaptureSpec] = Field(default_factory=list)
    """Values read from the agent's turns into `{{captured.NAME}}` for later turns and assertions."""
    timeout: Duration = Field(300.0, gt=0)
    """The most one run of the test may take; past it the run fails with `timeout`."""
    fuzz_tools: dict[str, FuzzSpec] = Field(default_factory=dict)
    """Tools (and remote agents) that misbehave on purpose in this test: name: error|empty|hostile|delay|custom."""
    counterpart: CounterpartSpec | None = None
    """Another target of the suite in the user's seat instead of a persona."""
    steps: list[dict[str, object]] = Field(default_factory=list)
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
        # the counterpart is the user: a script or persona beside it was never said (on to max_turns without them)
        # (and `stop_when` is the simulator's to judge: beside a counterpart nothing would, on to max_turns)
        ignored = [name for name, there in (("scenario.script", self.scenario.script), ("persona", self.persona),
                                            ("scenario.attack", self.scenario.attack),
                                            ("scenario.stop_when", self.scenario.stop_when))
                   if there and self.counterpart]
        if ignored:
            raise ValueError(f"counterpart plays the user, so {' and '.join(ignored)} would never be used: keep one "
                             "of them (the counterpart's first turn is its opening, or its answer to scenario.goal)")
        return self


class SecretsSpec(Strict):
    env_files: list[HomePath] = Field(default_factory=lambda: [".env"])
    """Files of `NAME=value` lines read for `{{secrets.NAME}}`, relative to tamesu.yaml; the environment wins."""


EXTENSION_PREFIX = "x-"


def without_extensions(data: object) -> object:
    """A file's top level without its `x-` keys: the user's own (as in Compose files), a place for YAML anchors the
    file merges elsewhere with `<<: *name`, ignored by the loader (and allowed by the exported schema)."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))}


class FileTop(Strict):
    """A file's top level: its `x-` keys are taken out before it is read (`without_extensions`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True,
                              json_schema_extra={"patternProperties": {f"^{EXTENSION_PREFIX}": {}}})


class SuiteSpec(FileTop):
    name: str | None = None
    """The suite's name in reports; default the file's name."""
    description: str | None = None
    """What the suite tests, for people."""
    targets: dict[str, dict[str, object]] = Field(default_factory=dict)
    """The agents the tests talk to, by name: each a mapping with its `type` and that type's keys."""
    defaults: Defaults = Field(default_factory=Defaults)
    """What every test of the suite gets: `assert` (graded before each test's own), `slo`, `adaptive`."""
    hooks: HooksSpec = Field(default_factory=HooksSpec)
    """Commands or HTTP requests run around the suite's tests: `before_all`, `after_all`, `before_each`,
    `after_each`."""
    vars: dict[str, object] = Field(default_factory=dict)
    """Variables for every test's templates (`{{vars.NAME}}`), over the project's."""
    models: ModelMap = Field(default_factory=dict)
    """`simulator`, `judge`, `extract`, or any name an assertion's `model:` refers to."""
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    """The most this suite's runs may spend on tamesu's own model calls (`usd`, `tokens`)."""
    packs: dict[str, PackSpec] = Field(default_factory=dict)
    """The suite's own packs, used as `pack: NAME`; they replace the project's and built-in ones of that name."""
    remote_agents: dict[str, RemoteAgentSpec] = Field(default_factory=dict)
    """Scripted A2A agents served for every run of the suite's tests, for the agent under test to delegate to."""
    traces: TracesSpec | YamlBool | None = None
    """The suite's own `traces:`; unset or `true`: the project's; `false`: none (its agent is not traced)."""
    load: LoadSpec | None = None
    """After the tests ran: each `ramp` stage runs them with that many conversations at once for `hold`, and
    reports the stage's latency percentiles (`load.json`, the console, the HTML report)."""
    tests: list[dict[str, object]] = Field(default_factory=list)
    """The suite's tests."""


class ReportSettings(Strict):
    """`report:` in tamesu.yaml: the reports every `tamesu run` writes, as `--report` would name them."""

    formats: list[str] = Field(default_factory=lambda: ["html"])
    """`junit:reports/junit.xml`, `html`, `github`...; a path is relative to tamesu.yaml. The loader checks the
    names against the report formats (built-in and plug-ins). Default: the HTML report in the run folder (small,
    and the run ends with its path); `report: []` writes none."""
    baseline: HomePath | None = None
    """An earlier run directory, or a folder of runs (its newest other run), to compare with."""
    tolerance: YamlFloat = Field(0.2, ge=0)
    """A metric change smaller than this fraction of the baseline's value is not reported."""
    SHORTHAND_SCHEMA: ClassVar[dict[str, object]] = {"type": ["string", "array"], "items": {"type": "string"}}

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        return {"formats": value} if isinstance(value, list) else value


class ProjectSpec(FileTop):
    """`tamesu.yaml`: what every suite of a project shares."""

    suites: list[str] = Field(default_factory=lambda: ["suites/*.yaml", "**/*.tamesu.yaml"])
    """Globs of the suite files the project runs, relative to tamesu.yaml; `**` does not go into hidden folders,
    `node_modules`, `__pycache__`, virtual environments or run folders."""
    targets: dict[str, dict[str, object]] = Field(default_factory=dict)
    """Agents named for `tamesu test -n NAME` (JSONL tests); the same shape as a suite's `targets`."""

    @field_validator("suites", mode="before")
    @classmethod
    def _nothing_written(cls, value: object) -> object:
        # `suites:` with nothing after it names no suite, as `suites: []` does: the loader says so at the key
        return [] if value is None else value
    models: ModelMap = Field(default_factory=dict)
    """The models tamesu uses (`simulator`, `judge`, `extract`, or any name an assertion's `model:` names)."""
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    """The most a run may spend on tamesu's own model calls; past it the run stops with exit 4."""
    packs: dict[str, PackSpec] = Field(default_factory=dict)
    """Packs every suite of the project may use as `pack: NAME`."""
    cache: CacheSpec = Field(default_factory=CacheSpec)
    """The replay cache of model calls: where it lives and whether it is read, written or required."""
    defaults: Defaults = Field(default_factory=Defaults)
    """What every test of every suite gets: `assert`, `slo`, `adaptive`."""
    hooks: HooksSpec = Field(default_factory=HooksSpec)
    """Commands or HTTP requests run around every suite: `before_all`, `after_all`, `before_each`, `after_each`."""
    secrets: SecretsSpec = Field(default_factory=SecretsSpec)
    """Where secrets come from besides the environment: `env_files` (default `.env`)."""
    vars: dict[str, object] = Field(default_factory=dict)
    """Variables for every suite's templates (`{{vars.NAME}}`)."""
    out: HomePath = "tamesu-runs"
    """The folder run directories are written under, relative to tamesu.yaml (`~/...`: the home folder)."""
    parallel: YamlInt = Field(1, ge=1, le=10000)
    """How many test runs go at once (`--parallel` overrides it)."""
    report: ReportSettings = Field(default_factory=ReportSettings)
    """The reports every run writes (`formats`), and the baseline it is compared with."""
    store: StoreSetting = None
    """The results store: unset or `true` (SQLite in .tamesu/store.db, the default), a SQLite path,
    `postgresql://...`, or `false` (off). TAMESU_STORE overrides it (an empty TAMESU_STORE is unset)."""
    traces: TracesSpec | None = None
    """Receive the agent's spans (OTLP/HTTP) for every suite that does not say otherwise."""
    trace_url: str | None = None
    """A link to the agent's own trace of a turn, such as `http://localhost:16686/trace/{trace_id}`."""

    @field_validator("trace_url")
    @classmethod
    def _trace_url(cls, value: str | None) -> str | None:
        return checked_trace_url(value)
    yao_errors: YamlBool = False
    """JSONL cases (`tamesu test`) follow the agent test design's error classes, as `--yao-errors` asks."""
