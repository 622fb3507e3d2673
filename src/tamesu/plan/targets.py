"""Targets by name: each `targets:` entry validated by its type's own spec model (a key of another type is a
warning), the agent `tamesu test -n` names (a target of tamesu.yaml, or a URL), and the connector rule.

A grpc:// or grpcs:// URL is a grpc target (tamesu's turn API, on its `Converse` stream). A URL where an A2A
agent card is served (`/.well-known/agent-card.json`, or the older `agent.json`, at the origin or under the
URL's path) is an A2A target when this tamesu has one; any other http(s) URL is a rest target with the default
body (`{"message", "session_id"}`, plus `messages` when a case gives a history) whose reply
text is `$.text`. A connector (`-c`, a case's `options.connector`) is the model a model target answers with.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from tamesu import plugins, targets
from tamesu.checks import Assertion
from tamesu.conversation import FileRef
from tamesu.errors import ConfigError, Problem, article
from tamesu.net.clients import async_client
from tamesu.net.urls import url_problem
from tamesu.plan.model import Project
from tamesu.suite.problems import problems_from
from tamesu.suite.schema import ProjectSpec, SuiteSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import TURN_ROOTS, references, walk_strings
from tamesu.suite.yaml_reader import Document
from tamesu.targets.base import TargetSpec

if TYPE_CHECKING:  # a JSONL case, read for what it asks of the agent under test
    from tamesu.jsonl.parser import ParsedCase
    from tamesu.roles.scripted_users import HelperAgent

Loc = tuple[str | int, ...]
"""A place inside a case, as keys and indexes."""


def load_project_targets(project: Project) -> tuple[dict[str, TargetSpec], list[Problem]]:
    """The `targets:` of tamesu.yaml (for `tamesu test -n NAME`), validated by their types; raises ConfigError.
    Returns the targets and the warnings (a key of another target type)."""
    if project.doc is None or not project.spec.targets:
        return {}, []
    problems: list[Problem] = []
    warnings: list[Problem] = []
    loaded = load_targets(project.spec, project.doc, problems, warnings)
    if problems:
        raise ConfigError(problems)
    return loaded, warnings


def load_targets(
    spec: SuiteSpec | ProjectSpec, doc: Document, problems: list[Problem], warnings: list[Problem]
) -> dict[str, TargetSpec]:
    loaded: dict[str, TargetSpec] = {}
    for name, raw in spec.targets.items():
        loc = ("targets", name)
        kind = raw.get("type")
        if kind is None:
            problems.append(doc.problem(loc, "missing required key 'type' (one of "
                                        f"{', '.join(targets.usable_types())})"))
            continue
        if not isinstance(kind, str):
            written = "list" if isinstance(kind, list) else "mapping" if isinstance(kind, dict) else type(kind).__name__
            problems.append(doc.problem((*loc, "type"), f"type must be one word naming a target type (one of "
                                        f"{', '.join(targets.usable_types())}), not {article(written)}"))
            continue
        if not targets.is_known(kind):
            problems.append(doc.problem((*loc, "type"), f"unknown target type {kind!r} (one of "
                                        f"{', '.join(targets.usable_types())})"))
            continue
        try:
            cls = targets.target_class(kind)
        except plugins.PluginError as exc:
            problems.append(doc.problem((*loc, "type"), str(exc)))
            continue
        missing = cls.unavailable()
        if missing:
            problems.append(doc.problem((*loc, "type"), missing))
            continue
        own_keys = targets.keys_of(kind)
        kept = dict(raw)
        for key in raw:
            owner = targets.foreign_key_owner(kind, key)
            if key not in own_keys and owner is not None:
                warnings.append(doc.problem((*loc, key), f"{key!r} is a key of {owner} targets, "
                                            f"not {kind}; ignored", key=True))
                kept.pop(key)
        try:
            loaded[name] = cls.Spec.model_validate(kept)
        except ValidationError as exc:
            problems.extend(problems_from(exc, doc, cls.Spec, loc, owner=f"{kind} target"))
            continue
        url = getattr(loaded[name], "url", None)  # every target type's, a plug-in's too
        if isinstance(url, str) and (wrong := url_problem(url) or _env_url_problem(url)) is not None:
            problems.append(doc.problem((*loc, "url"), wrong))
            del loaded[name]
    return loaded

def _env_url_problem(url: str) -> str | None:
    """What makes `url` unsendable once its `{{env.X}}` are filled in, said with what they made: `SHOP_URL=
    127.0.0.1:8080` was each test's error at run time (exit 3) with no place. Judged only when every template
    is an environment variable that is set (a secret's value is never shown; an unset one is said apart)."""
    found = list(references(url))
    if not found or any(problem or not expr.startswith("env.") or expr[4:] not in os.environ
                        for expr, problem in found):
        return None
    from tamesu.errors import TemplateError
    from tamesu.suite.templates import Context

    try:  # as the run makes it: a value in `user:password@` percent-encoded
        made = Context(env=dict(os.environ)).render_url(url)
    except TemplateError:
        return None
    wrong = url_problem(made)
    if wrong is None:
        return None
    from tamesu.net.urls import shown_url

    return f"{' and '.join('{{' + e + '}}' for e, _ in found)} made it {shown_url(made)!r}: {wrong}"


CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
CARD_TIMEOUT = 5.0
"""The most a place may take to serve its whole card when `-n URL` is looked at."""
CARD_MAX_BYTES = 1 << 20
_URL = re.compile(r"^(https?|grpcs?)://", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
URLS = "http(s):// for a rest or A2A agent, grpc(s):// for one with tamesu's turn API"
"""The URLs `-n` (and `AgentSession.open`) takes, as said to whoever gives another."""
# the namespaces a target of tamesu.yaml may use in `tamesu test`: no suite vars or captures exist there
_ALLOWED_ROOTS = {"secrets", "env", "session", "message", "options", "listen", "response", "run", "args",
                  *TURN_ROOTS}


class TargetProblem(Exception):
    """`-n` names nothing usable (exit 2)."""


@dataclass
class ResolvedTarget:
    name: str
    spec: TargetSpec
    about: str
    """How the header names it: `expense (rest)`."""


def is_url(name: str) -> bool:
    return bool(_URL.match(name))


async def resolve(name: str | None, project: Project, secrets: Secrets,
                  looked_from: Path | None = None) -> tuple[ResolvedTarget, list[Problem]]:
    """The target `-n` names (None: the project's only target). Raises TargetProblem or ConfigError.
    `looked_from`: where tamesu.yaml was looked for (and above), to say so when none was found."""
    if name is not None and is_url(name):
        return await _from_url(name), []
    if name is not None and _SCHEME.match(name):
        raise TargetProblem(f"-n {name}: not a URL tamesu can test: give {URLS}, or a target of tamesu.yaml")
    loaded, warnings = load_project_targets(project)
    if project.doc is None:  # "tamesu.yaml has no targets: section" sent the user to a file that was never read
        named = f"-n {name}: no target named {name!r}" if name is not None else "name the agent to test with -n"
        start = looked_from or project.dir
        folder = start if start.is_dir() else start.parent
        raise TargetProblem(f"{named}: no tamesu.yaml in {folder} or a folder above it (up to the git repository's "
                            f"root); or give a URL ({URLS})")
    if name is None:
        if len(loaded) != 1:
            known = ", ".join(loaded) or "none in tamesu.yaml"
            raise TargetProblem(f"name the agent to test with -n (a target of tamesu.yaml or a URL; targets: {known})")
        name = next(iter(loaded))
    if name not in loaded:
        known = ", ".join(loaded) or "tamesu.yaml has no targets: section"
        raise TargetProblem(f"-n {name}: no target named {name!r} (targets: {known}); or give a URL ({URLS})")
    _check_templates(name, project, secrets)
    spec = loaded[name]
    return ResolvedTarget(name, spec, f"{name} ({spec.type})"), warnings


def _check_templates(name: str, project: Project, secrets: Secrets) -> None:
    """A template the target cannot fill at run time is an error now, at its place in tamesu.yaml."""
    assert project.doc is not None
    problems: list[Problem] = []
    for path, text in walk_strings(project.spec.targets[name]):
        for expr, problem in references(text):
            root = expr.partition(".")[0]
            loc = ("targets", name, *path)
            if problem and root not in (*TURN_ROOTS, "options"):
                problems.append(project.doc.problem(loc, problem))
            elif not problem and root not in _ALLOWED_ROOTS:
                problems.append(project.doc.problem(loc, f"{{{{{expr}}}}} is not available to `tamesu test`"))
            elif root == "env" and expr.partition(".")[2] not in os.environ:
                problems.append(project.doc.problem(loc, f"environment variable {expr[4:]} is not set"))
            elif root == "secrets" and not secrets.has(expr.partition(".")[2]):
                problems.append(project.doc.problem(loc, secrets.unset(expr[8:])))
    if problems:
        raise ConfigError(problems)


async def _from_url(url: str) -> ResolvedTarget:
    host = urlsplit(url).netloc
    if url.lower().startswith("grpc"):
        if not targets.is_known("grpc"):
            raise TargetProblem(f"-n {url}: the grpc target is not available in this version of tamesu")
        return ResolvedTarget(host, _validated("grpc", {"type": "grpc", "url": url}), f"{url} (grpc)")
    card_at = await find_card(url)
    if card_at is not None:
        if not a2a_available():
            raise TargetProblem(f"an A2A agent card is served at {card_at}, but the a2a target is not available "
                                "in this version of tamesu")
        return ResolvedTarget(host, _validated("a2a", {"type": "a2a", "url": url}), f"{url} (a2a, card {card_at})")
    return ResolvedTarget(host, _validated("rest", {"type": "rest", "url": url}), f"{url} (rest)")


def a2a_available() -> bool:
    return targets.is_known("a2a") and importlib.util.find_spec("tamesu.targets.a2a") is not None


def _validated(kind: str, raw: Mapping[str, object]) -> TargetSpec:
    try:
        return targets.target_class(kind).Spec.model_validate(raw)
    except ValidationError as exc:
        raise TargetProblem(f"-n {raw['url']}: {exc.errors()[0]['msg']}") from None


async def find_card(url: str) -> str | None:
    """Where an agent card is served for `url`, or None (nothing there, not JSON, not a card)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    base = f"{origin}{parts.path}".rstrip("/")
    places = [origin + p for p in CARD_PATHS] + ([base + p for p in CARD_PATHS] if base != origin else [])
    async with async_client(CARD_TIMEOUT) as http:
        for place in places:
            try:
                # httpx's timeout is per read: a server sending a byte a second held `tamesu test` for ever
                async with asyncio.timeout(CARD_TIMEOUT):
                    body = await _card_body(http, place)
            except (httpx.HTTPError, TimeoutError):
                return None  # nothing answers there, or not in time: the run itself will say so
            if body is None:
                continue
            try:
                card = json.loads(body)
            except ValueError:
                continue
            if isinstance(card, dict) and "name" in card and \
                    any(k in card for k in ("url", "supportedInterfaces", "additionalInterfaces", "skills")):
                return place
    return None


async def _card_body(http: httpx.AsyncClient, place: str) -> bytes | None:
    """The body of a 200 answer at `place`, or None (another status, or past CARD_MAX_BYTES: no card is)."""
    async with http.stream("GET", place, headers={"Accept": "application/json"}) as answer:
        if answer.status_code != 200:
            return None
        body = bytearray()
        async for chunk in answer.aiter_bytes():
            body += chunk
            if len(body) > CARD_MAX_BYTES:
                return None
        return bytes(body)


def file_refusal(resolved: ResolvedTarget, project: Project,
                 connector: str | None = None) -> Callable[[FileRef, str | None], str | None]:
    """Why the agent under test cannot get a file of a case (whose own connector is the second argument;
    `-c`, `connector`, wins over it), for the parser to refuse that case when it loads."""
    cls = targets.target_class(resolved.spec.type)

    def refuse(file: FileRef, case_connector: str | None) -> str | None:
        spec = with_connector(resolved.spec, connector or case_connector)
        reason = cls.file_refusal(spec, file, project.spec.models)
        return f"the agent under test ({resolved.about}) cannot get this file: {reason}" if reason else None

    return refuse


def history_refusal(kind: str, name: str) -> str | None:
    """Why a target of this type cannot send a stateless case's message history (its protocol has no place for
    earlier messages), or None when it carries one: such a case is refused, never run on its last message."""
    if targets.target_class(kind).carries_history:
        return None
    return (f"the {kind} target {name} cannot send a message history: its protocol carries one user turn at a "
            "time; write the user's messages as turns[] to play them in order")


def with_connector(spec: TargetSpec, connector: str | None) -> TargetSpec:
    """The target as a connector has it answer: a model target on the connector's model; any other target as
    it is (it gets the connector as `options.connector`)."""
    if connector is None or spec.type != "model":
        return spec
    return spec.model_copy(update={"model": connector})


def connector_target(suite_targets: dict[str, TargetSpec], target: ResolvedTarget, connector: str | None) -> str:
    """The name of the target a test with this connector talks to: a model target answered by the connector's
    model is the same target under its own name, added to the suite's targets."""
    if connector is None or target.spec.type != "model":
        return target.name
    name = f"{target.name} ({connector})"
    suite_targets.setdefault(name, with_connector(target.spec, connector))
    return name


class _WithOptions(Protocol):
    """A JSONL case or turn, as far as its options go (`jsonl.schema`)."""

    @property
    def options(self) -> Any: ...


class _Case(_WithOptions, Protocol):
    @property
    def turns(self) -> Sequence[_WithOptions]: ...


def unsent_options(kind: str | None, case: _Case) -> list[tuple[Loc, str]]:
    """Where a JSONL case writes options an agent of this type never gets, with the warning."""
    written = [(("options",), case.options), *((("turns", n, "options"), t.options) for n, t in enumerate(case.turns))]
    return [(loc, why) for loc, options in written
            if options is not None and (why := dropped_options(kind, for_the_agent(options.sent()))) is not None]


def unknown_connectors(kind: str | None, case: _Case, models: Iterable[str]) -> list[tuple[Loc, str]]:
    """On a model target a connector (a case's, a turn's) is the model that answers: where one names no model,
    with why; refused where it is written, not an error of every run. Any other target gets it as
    options.connector, whatever it names."""
    if kind != "model":
        return []
    written = [(("options",), case.options), *((("turns", n, "options"), t.options) for n, t in enumerate(case.turns))]
    return [((*loc, "connector"), why) for loc, options in written
            if options is not None and (why := unknown_model(options.connector, models)) is not None]


_HELPERS_TAKE = {"simulator": ("connector", "metadata"), "agent": ("connector", "metadata"), "script": ("metadata",)}
_HELPER_NAMES = {"simulator": "a simulator", "agent": "an agent assertion", "script": "a script assertion"}


def unsent_to_helpers(simulator: Mapping[str, object] | None,
                      assertions: Sequence[tuple[Loc, object]]) -> list[tuple[Loc, str]]:
    """Where a JSONL case writes options its simulator, validator or script assertion is never given (only a
    connector and the metadata travel to them; every helper call skips history), with the warning."""
    written: list[tuple[Loc, str, Mapping[str, object]]] = [(("simulator", "options"), "simulator", simulator)] \
        if simulator else []
    written += [((*loc, "options"), raw["type"], raw["options"]) for loc, raw in assertions if isinstance(raw, dict)
                and raw.get("type") in ("agent", "script") and isinstance(raw.get("options"), dict)]
    warnings = []
    for loc, kind, options in written:
        taken = _HELPERS_TAKE[kind]
        if dropped := [f"options.{key}" for key in options if key not in taken]:
            given = " and ".join(f"options.{key}" for key in taken)
            warnings.append((loc, f"{_HELPER_NAMES[kind]} is given only {given}: {', '.join(dropped)} "
                                  f"{'is' if len(dropped) == 1 else 'are'} dropped"))
    return warnings


def for_the_agent(sent: Mapping[str, object]) -> list[str]:
    """The options keys meant for the agent: a `metadata` of voice keys alone (dtmf, voice, behaviors) is
    tamesu's own to act on, and `voice_warnings` says when the target cannot."""
    metadata = sent.get("metadata")
    voice_only = isinstance(metadata, Mapping) and bool(metadata) and set(metadata) <= {*_PERSONA_KEYS, "dtmf"}
    return [key for key in sent if not (key == "metadata" and voice_only)]


def dropped_options(kind: str | None, keys: Iterable[str]) -> str | None:
    """Why some of these `options` keys never reach an agent of this type (its protocol has no place for
    them), or None when all do."""
    if kind is None or not targets.is_known(kind):
        return None
    taken = targets.target_class(kind).takes_options
    dropped = [key for key in keys if taken is not None and key not in taken]
    if not dropped:
        return None
    said = ", ".join(f"options.{key}" for key in dropped)
    sends = "no options" if not taken else "only " + " and ".join(f"options.{key}" for key in sorted(taken))
    return f"{article(kind)} target sends {sends} to the agent: {said} {'is' if len(dropped) == 1 else 'are'} " \
           "dropped"


def unseen_tool_calls(kind: str | None, located: list[tuple[Loc, Assertion]], traced: bool) -> list[tuple[Loc, str]]:
    """A JSONL case's tool assertions an agent of type `kind` can never be seen calling (an A2A agent reports none;
    a case has no remote agents), unless `traced` (the project's `traces:`, whose execute_tool spans are its calls):
    each with its warning, said as a YAML test's is (`plan._fit.unseen_tools`), since each run is the same error."""
    from tamesu.plan._fit import unseen_tools

    return [(loc, f"{why}: every run of the test is an error") for loc, assertion in located
            if (why := unseen_tools(assertion, kind, (), traced)) is not None]


@dataclass
class Resolver:
    """What a JSONL case may name (a validator, a simulator, a generator): models and targets of the project,
    folders that hold scripts."""

    models: set[str] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)
    search: list[Path] = field(default_factory=list)
    helpers: Mapping[str, HelperAgent] = field(default_factory=dict)
    """`TargetHelper`s by target name: targets that may play the simulator, a validator or a generator."""

    def helper(self, name: str | None) -> HelperAgent | None:
        """The target helper `name` names when it is a target and not a model (a model wins a tie)."""
        if name is None or name in self.models:
            return None
        return self.helpers.get(name)

    def model_for(self, name: str | None) -> str | None:
        """The model an `agent` assertion or a simulator names; raises ValueError when nothing has that name."""
        if name is None or name == "judge":
            if "judge" not in self.models:
                raise ValueError("no validator model: set models.judge in tamesu.yaml, or name a model with "
                                 "use: agents:NAME")
            return None
        if (why := unknown_model(name, self.models)) is not None:
            raise ValueError(why)
        return name


def unknown_model(name: str | None, models: Iterable[str]) -> str | None:
    """Why `name` (a connector, a validator's or simulator's model) names no model, or None when it does: a name
    under `models:`, or provider:model."""
    if name is None or name in models:
        return None
    if ":" in name:  # provider:model, its provider known: `foo:bar` was an error of every run that asked it
        from tamesu.models.spec import ModelSpec

        try:
            ModelSpec.model_validate(name)
        except ValidationError as exc:
            said = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            return f"{name!r} is no model: {said}"
        return None
    known = ", ".join(sorted(models)) or "none configured"
    return f"no model named {name!r} under models: (models: {known})"


_PERSONA_KEYS = ("voice", "behaviors")


def _voice_places(parsed: ParsedCase) -> Iterator[tuple[tuple[object, ...], dict[str, object]]]:
    case = parsed.case
    if case.simulator is not None:
        yield ("simulator", "metadata"), case.simulator.metadata
        if case.simulator.options is not None:
            yield ("simulator", "options", "metadata"), case.simulator.options.metadata
    if case.options is not None:
        yield ("options", "metadata"), case.options.metadata
    for i, turn in enumerate(case.turns):
        if turn.options is not None:
            yield ("turns", i, "options", "metadata"), turn.options.metadata


def voice_warnings(cases: list[ParsedCase], target_name: str, spec: object) -> list[str]:
    """JSONL cases that ask for voice (a persona's `voice` or `behaviors`, a `dtmf` digit) against a target that
    cannot honour them: one line each, as `file:line:col: path: problem`, never silently dropped. A case may
    write them in `simulator.metadata`, `simulator.options.metadata`, `options.metadata` (voice, behaviors,
    dtmf), and each turn's `options.metadata` (dtmf)."""
    kind = getattr(spec, "type", "")
    speaks = targets.has_audio(kind, spec)
    digits = targets.sends_dtmf(kind, spec)
    found: list[str] = []
    for parsed in cases:
        for loc, metadata in _voice_places(parsed):
            for key in metadata:
                if key in _PERSONA_KEYS and not speaks:
                    found.append(str(parsed.doc.problem((*loc, key), f"{kind} target {target_name} has no audio: "
                                                                     f"{key} is not used", key=True)))
                elif key == "dtmf" and not digits:
                    found.append(str(parsed.doc.problem((*loc, key), f"{kind} target {target_name} cannot send "
                                                                     "DTMF digits: dtmf is not sent", key=True)))
    return found
