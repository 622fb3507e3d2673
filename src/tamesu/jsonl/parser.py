"""JSONL text to validated test cases, every problem of every case at once as `file:line:col: path: problem`.

Beyond the schema, a case is checked for what would otherwise fail silently at run time: a mode without its
first input, a history that does not end with the user or that the agent under test cannot get, an unknown
`after` id or a cycle among checkpoints, a checkpoint without an assertion, a file attachment that does not
exist or that the agent cannot get, a simulator, validator or script that names nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tamesu.checks import Assertion, AssertionProblem, tell_test_id
from tamesu.checks.checkpoint import PlannedCheckpoint, in_order
from tamesu.conversation import FileRef
from tamesu.errors import ConfigError, Problem
from tamesu.jsonl import assertions as mapping
from tamesu.jsonl.schema import ChatMessage, ContentPart, Options, TestCase
from tamesu.plan.simulators import connector_problem, simulator_named
from tamesu.plan.targets import Loc, Resolver, unknown_connectors, unseen_tool_calls, unsent_options, unsent_to_helpers
from tamesu.roles.case_user import SimulatorRef
from tamesu.roles.files import file_path, is_file, sent_file
from tamesu.runtime.gc_pause import collector_paused
from tamesu.suite.json_lines import JsonDocument, values
from tamesu.suite.problems import problems_from


@dataclass
class Graded:
    """One assertion as written and as the engine grades it."""

    raw: Any
    assertion: Assertion
    loc: Loc = ()
    """Where the assertion is written in its case."""


@dataclass
class ParsedCase:
    case: TestCase
    doc: JsonDocument
    base_dir: Path
    """The folder of the JSONL file: attachments and scripts are relative to it."""
    file_dirs: list[Path] = field(default_factory=list)
    """Where relative attachments are looked for: `base_dir`, then the project's folder."""
    turn_assertions: dict[int, list[Graded]] = field(default_factory=dict)
    final: list[Graded] = field(default_factory=list)
    """Standard mode: the assertions; multi-turn and dynamic: `final_assertions` (and `assertions`)."""
    checkpoints: list[PlannedCheckpoint] = field(default_factory=list)
    """In an order where every checkpoint comes after those it waits for."""
    simulator: SimulatorRef | None = None

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def line(self) -> int:
        return self.doc.problem((), "").line

    def located(self) -> list[tuple[Loc, Assertion]]:
        """Every assertion of the case with its place: the final ones, the turns', the checkpoints'."""
        graded = [*self.final, *(g for turn in self.turn_assertions.values() for g in turn)]
        located = [(g.loc, g.assertion) for g in graded]
        return located + [(("checkpoints", i, "assertion"), c.assertion) for i, c in enumerate(self.checkpoints)]


@dataclass
class ParseSettings:
    resolver: Resolver
    default_simulator: str | None = None
    """`--simulator`: for cases that need one and name none."""
    file_dirs: list[Path] = field(default_factory=list)
    """Where a relative attachment path is looked for after the JSONL file's folder (the project's folder)."""
    file_refusal: Callable[[FileRef, str | None], str | None] | None = None
    """Why the agent under test cannot carry this file (given the case's connector), or None: such a case is
    refused when it loads, not sent without its file."""
    history_refusal: str | None = None
    """Why the agent under test cannot get a message history, or None: a case whose input is one is refused
    when it loads, never run on its last message alone."""
    target_type: str | None = None
    """The type of the agent under test, when known: a tool assertion on a type that reports no tool calls
    (`Target.reports_tool_calls`, an `a2a` agent's) is a warning, unless `traced`."""
    traced: bool = False
    """The project has `traces:`: the agent's execute_tool spans are its tool calls, whatever its type."""
    warnings: list[Problem] = field(default_factory=list)
    """What is suspicious but not wrong, appended while parsing."""
    yao_errors: bool = False
    """The design's error classes: a case with no first input loads, and fails when it runs ("no initial
    input"), instead of refusing the file."""


@collector_paused()  # the cases live to the end (tamesu.runtime.gc_pause)
def parse_text(text: str, label: str, base_dir: Path, settings: ParseSettings) -> list[ParsedCase]:
    """Every case of a JSONL text; raises ConfigError with all problems when any case is wrong."""
    problems: list[Problem] = []
    parsed: list[ParsedCase] = []
    seen: dict[str, int] = {}
    for item in values(text, label):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        raw, doc = item
        case = _parse_case(raw, doc, base_dir, settings, problems)
        if case is None:
            continue
        if case.id in seen:
            problems.append(doc.problem(("id",), f"another test case has id {case.id!r} (line {seen[case.id]})"))
            continue
        seen[case.id] = case.line
        parsed.append(case)
    if problems:
        raise ConfigError(problems)
    return parsed


def parse_file(path: Path, label: str, settings: ParseSettings) -> list[ParsedCase]:
    from tamesu.suite.yaml_reader import read_bounded

    folder = False
    with contextlib.suppress(OSError):  # a path we may not look at: reading it says why
        folder = path.is_dir()
    if folder:
        raise ConfigError([Problem(label, 1, 1, "", "a folder: name one of its JSONL files (`tamesu validate "
                                   f"{label}` checks them all)")])
    # a regular file of bounded size, UTF-8 without NUL bytes; a byte-order mark is dropped
    text = read_bounded(path, label)
    cases = parse_text(text, label, path.parent.resolve(), settings)
    if not cases:
        raise ConfigError([Problem(label, 1, 1, "", "no test cases in the file")])
    return cases


@collector_paused()  # the cases live to the end (tamesu.runtime.gc_pause)
def parse_objects(objects: Sequence[object], label: str, base_dir: Path, settings: ParseSettings) -> list[ParsedCase]:
    """Cases made by a generator: one JSON line each, so a problem names the generated case's line."""
    text = "\n".join(json.dumps(item, ensure_ascii=False) for item in objects)
    return parse_text(text, label, base_dir, settings)


class _OneMessage(JsonDocument):
    """A case whose `input` is one message {role, content}: read as a list of one, it has no index 0 in the file,
    so a problem of it is named `input.role`, not `input[0].role` (at the message's own key, not the object)."""

    def problem(self, loc: Sequence[object], message: str, *, key: bool = False) -> Problem:
        if len(loc) > 1 and loc[0] == "input" and loc[1] == 0:
            loc = ("input", *loc[2:])
        return super().problem(loc, message, key=key)


def _parse_case(raw: object, doc: JsonDocument, base_dir: Path, settings: ParseSettings,
                problems: list[Problem]) -> ParsedCase | None:
    if not isinstance(raw, dict):
        problems.append(doc.problem((), "a test case is a JSON object with id and input"))
        return None
    if isinstance(raw.get("input"), dict):
        doc = _OneMessage(**vars(doc))
    try:
        case = TestCase.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from(exc, doc, TestCase, owner="test case"))  # type: ignore[arg-type]  # a JsonDocument answers what problems_from asks of a Document
        return None
    if settings.default_simulator is not None:
        case.drive_with_simulator()
    before = len(problems)
    dirs = list(dict.fromkeys([base_dir, *settings.file_dirs]))
    found = ParsedCase(case, doc, base_dir, dirs)
    shape: list[Problem] = []
    _check_shape(case, doc, shape)
    # the design fails a case with no initial input when it runs; tamesu refuses it here, or with the design's
    # classes loads it and says so where it is written
    for problem in shape:
        if settings.yao_errors and any(no in problem.message for no in _NO_INPUT):
            settings.warnings.append(replace(problem, message=f"{problem.message} (loaded for the design's error "
                                             "classes: it runs as the suite's error)"))
        else:
            problems.append(problem)
    if settings.history_refusal is not None and case.input is not None and len(case.input) > 1:
        problems.append(doc.problem(("input",), f"a history of {len(case.input)} messages would reach the agent as "
                                    f"its last message alone ({settings.history_refusal})"))
    _check_files(case, doc, dirs, settings, problems)
    problems += [doc.problem(loc, why) for loc, why in unknown_connectors(settings.target_type, case,
                                                                          settings.resolver.models)]
    resolver = settings.resolver
    assert_key = "assert" if "assert" in raw else "assertions"
    if case.type == "single_turn" and len(case.turns) == 1:
        # the earlier revision's `{"type": "single_turn", "turns": [one]}` is `{"input": ...}`: the turn's
        # assertions grade the one answer, and the case runs as a standard one
        key = "assert" if "assert" in raw["turns"][0] else "assertions"
        found.final = [*_graded(case.turns[0].assertions, ("turns", 0, key), resolver, None, doc, problems),
                       *_graded(case.assertions, (assert_key,), resolver, None, doc, problems)]
        found.case = _as_standard(case)
        _finish(found, settings)
        return found if len(problems) == before else None
    if case.mode == "standard":
        found.final = _graded(case.assertions, (assert_key,), resolver, None, doc, problems)
    else:
        found.final = [*_graded(case.assertions, (assert_key,), resolver, None, doc, problems),
                       *_graded(case.final_assertions, ("final_assertions",), resolver, None, doc, problems)]
    for number, turn in enumerate(case.turns, start=1):
        key = "assert" if "assert" in raw["turns"][number - 1] else "assertions"
        found.turn_assertions[number] = _graded(turn.assertions, ("turns", number - 1, key), resolver, number,
                                                doc, problems)
    found.checkpoints = _checkpoints(case, doc, resolver, problems)
    if case.mode != "standard":
        found.simulator = _simulator(case, doc, settings, problems)
        _check_turn_setting(case, doc, problems)
    _finish(found, settings)
    return found if len(problems) == before else None


def _finish(found: ParsedCase, settings: ParseSettings) -> None:
    located = found.located()
    tell_test_id([assertion for _, assertion in located], found.case.id)
    settings.warnings += [found.doc.problem(loc, why) for loc, why in unseen_tool_calls(settings.target_type, located,
                                                                                           settings.traced)]
    settings.warnings += [found.doc.problem(loc, why) for loc, why in unsent_options(settings.target_type, found.case)]
    simulator = found.case.simulator
    raws = [(g.loc, g.raw) for g in [*found.final, *(g for turn in found.turn_assertions.values() for g in turn)]]
    raws += [(("checkpoints", n, "assertion"), c.assertion) for n, c in enumerate(found.case.checkpoints)]
    # a script simulator is given its options as written: nothing of them is dropped
    scripted = simulator is not None and (simulator.use or settings.default_simulator or "").startswith("scripts:")
    sent = simulator.options.sent() if simulator and simulator.options and not scripted else None
    settings.warnings += [found.doc.problem(loc, why) for loc, why in unsent_to_helpers(sent, raws)]


def _as_standard(case: TestCase) -> TestCase:
    """A single_turn case written with its one turn, as the standard case it equals: the turn's input (its
    attachments among the content parts) and options (over the case's)."""
    turn = case.turns[0]
    message = turn.input
    if turn.attachments:
        parts = message.content if isinstance(message.content, list) else \
            [ContentPart(type="text", text=message.content)] if message.content else []
        message = message.model_copy(update={"content": [*parts, *turn.attachments]})
    options = case.options
    if turn.options is not None:
        merged = {**(options.sent() if options else {}), **turn.options.sent()}
        options = Options.model_validate(merged)
    return case.model_copy(update={"input": [message], "turns": [], "options": options, "type": None})


_NO_INPUT = ("a test case needs input", "a multi-turn case needs turns")
_MULTI_TURN_ONLY = {"final_assertions": "final_assertions belong to multi-turn cases; a standard case has assertions",
                    **{key: f"{key} belongs to multi-turn cases: a standard case is one call, its answer never awaited "
                            '("type": "multi_turn" plays it on)' for key in ("interactive", "on_missing_input")}}
_LAST_FROM_THE_USER = "the last message of input is the one the agent answers: it must be from the user"


def _check_shape(case: TestCase, doc: JsonDocument, problems: list[Problem]) -> None:
    if "checkpoints" in case.model_fields_set and not case.checkpoints:
        # the case was meant to be dynamic: without a word it ran as a multi-turn or standard one, checking nothing
        problems.append(doc.problem(("checkpoints",), "empty: a dynamic case needs at least one checkpoint",
                                    key=True))
        return
    mode = case.mode
    problems += [doc.problem(("turns", n, "input", "role"), "a turn's input is what the user says: its role is user "
                             "(the agent's words belong in a message history, input [...])")
                 for n, turn in enumerate(case.turns) if turn.input.role != "user"]
    if mode == "standard":  # never read by the one call a standard (or single_turn) case is
        problems += [doc.problem((key,), _MULTI_TURN_ONLY[key], key=True) for key in _MULTI_TURN_ONLY
                     if getattr(case, key) not in (None, [])]
        problems += [doc.problem(("max_turns",), "a standard case is one call: max_turns is for cases of several "
                                 "turns", key=True)] if case.max_turns is not None else []
    if case.type == "single_turn":
        if case.checkpoints or case.simulator is not None:
            what = "checkpoints" if case.checkpoints else "simulator"
            problems.append(doc.problem((what,), f"a single_turn case has no {what}", key=True))
        elif len(case.turns) > 1:
            problems.append(doc.problem(("turns", 1), f"a single_turn case has one turn, not {len(case.turns)} "
                                        "(drop type: single_turn to play them in order)"))
        elif case.turns and case.input:
            problems.append(doc.problem(("input",), "the input is turns[0].input or input, not both", key=True))
        elif not case.turns and not case.input:
            problems.append(_no_input(case, doc, "a test case needs input (text, a message, or a message history)"))
        elif case.input and case.input[-1].role != "user":
            problems.append(doc.problem(("input", len(case.input) - 1, "role"), _LAST_FROM_THE_USER))
        return
    if mode == "standard":
        if not case.input:
            problems.append(_no_input(case, doc, "a test case needs input (text, a message, or a message history), "
                                      "turns, or a simulator with checkpoints"))
        elif case.input[-1].role != "user":
            problems.append(doc.problem(("input", len(case.input) - 1, "role"), _LAST_FROM_THE_USER))
    if mode == "multi_turn":
        if case.turns and case.input:
            problems.append(doc.problem(("input",), "the first input is turns[0].input or input, not both",
                                        key=True))
        elif not case.turns and not case.input:
            problems.append(_no_input(case, doc, "a multi-turn case needs turns (or input to start with)"))
        elif case.input and case.input[-1].role != "user":
            problems.append(doc.problem(("input",), "input must end with a user message"))
    if mode == "dynamic":
        if case.turns:
            problems.append(doc.problem(("turns",), "a dynamic case is played by its simulator: no turns "
                                        "(use input for a first message)", key=True))
        if not case.checkpoints:
            problems.append(doc.problem(("type",), "a dynamic case needs checkpoints"))
        problems += [doc.problem((key,), f"{key} belongs to multi-turn cases: a dynamic case's simulator gives every "
                                 "input until its checkpoints are reached", key=True)
                     for key in ("interactive", "on_missing_input") if getattr(case, key) is not None]
        if case.input and case.input[-1].role != "user":
            problems.append(doc.problem(("input",), "input must end with a user message"))


def _no_input(case: TestCase, doc: JsonDocument, needs: str) -> Problem:
    """A case with no first input: where `input` or `turns` is written empty (or null), else at the case."""
    written = next((key for key in ("input", "turns") if key in case.model_fields_set), None)
    if written is None:
        return doc.problem((), needs)
    return doc.problem((written,), f"{'null' if getattr(case, written) is None else 'empty'}: {needs}", key=True)


def _parts(case: TestCase) -> list[tuple[Loc, ContentPart]]:
    def files(message: ChatMessage) -> list[tuple[int, ContentPart]]:
        # positions among all the content parts, as the file has them, not among the files alone
        content = message.content if isinstance(message.content, list) else []
        return [(p, part) for p, part in enumerate(content) if part.type != "text"]

    found: list[tuple[Loc, ContentPart]] = []
    for m, message in enumerate(case.input or []):
        found += [(("input", m, "content", p), part) for p, part in files(message)]
    for t, turn in enumerate(case.turns):
        found += [(("turns", t, "input", "content", p), part) for p, part in files(turn.input)]
        found += [(("turns", t, "attachments", a), part) for a, part in enumerate(turn.attachments)]
    return found


def written_in(parsed: ParsedCase, folder: Path) -> dict[str, Any]:
    """The case as a JSONL line in `folder` holds it (`--dry-run -o`): a local file's `file://` source written from
    there, so the saved file loads where it is, not only while the project's folder happens to have the file."""
    case = parsed.case.model_copy(deep=True)
    for _, part in _parts(case):
        path = file_path(part.source or "", parsed.file_dirs or parsed.base_dir)
        here = file_path(part.source or "", folder)
        if path is None or not is_file(path) or (here is not None and here.resolve() == path.resolve()):
            continue
        try:
            part.source = "file://" + Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix()
        except ValueError:  # another drive: only the whole path reaches it
            part.source = path.resolve().as_uri()
    return case.as_json()


def file_ref(part: ContentPart, dirs: Path | list[Path]) -> FileRef:
    """A content part's file as a user turn carries it: a local path, or a URI the agent fetches."""
    return sent_file(part.source or "", part.name, part.mime, dirs)


def _check_files(case: TestCase, doc: JsonDocument, dirs: list[Path],
                 settings: ParseSettings, problems: list[Problem]) -> None:
    connector = case.options.connector if case.options else None
    for loc, part in _parts(case):
        path = file_path(part.source or "", dirs)
        if path is not None and not is_file(path):
            where = " or ".join(str(folder / (part.source or "").removeprefix("file://")) for folder in dirs)
            problems.append(doc.problem((*loc, "source"), f"file not found: {where}"))
            continue
        if settings.file_refusal is not None:
            reason = settings.file_refusal(file_ref(part, dirs), connector)
            if reason is not None:
                problems.append(doc.problem((*loc, "source"), reason))


def _check_turn_setting(case: TestCase, doc: JsonDocument, problems: list[Problem]) -> None:
    """`max_turns` (the simulator's setting too, the earlier revision's) is a number of turns, and leaves room for
    the turns the case writes: they would fail as 'max turns exceeded' before they were all said."""
    spec, written = case.simulator, len(case.turns)
    places: list[tuple[Loc, dict[str, object]]] = [((), case.model_dump(include={"max_turns"}, exclude_none=True))]
    places += [] if spec is None else [(("simulator", "metadata"), spec.metadata), *(
        [(("simulator", "options", "metadata"), spec.options.metadata)] if spec.options is not None else [])]
    for loc, value in [(loc, metadata["max_turns"]) for loc, metadata in places if "max_turns" in metadata]:
        why = f"max_turns is a number of turns from 1 to 1000, not {json.dumps(value)}" if type(value) is not int \
            or not 1 <= value <= 1000 else f"max_turns {value} is fewer than the {written} turns written: they " \
            "could never all be said" if value < written else None
        problems += [doc.problem((*loc, "max_turns"), why)] if why else []


def _graded(entries: Sequence[object], loc: Loc, resolver: Resolver, on_turn: int | None, doc: JsonDocument,
            problems: list[Problem]) -> list[Graded]:
    graded: list[Graded] = []
    for index, entry in enumerate(entries):
        try:
            graded.append(Graded(entry, mapping.to_engine(entry, resolver, on_turn), (*loc, index)))
        except AssertionProblem as exc:
            problems.append(doc.problem((*loc, index, *exc.loc), exc.message, key=exc.at_key))
    return graded


def _checkpoints(case: TestCase, doc: JsonDocument, resolver: Resolver,
                 problems: list[Problem]) -> list[PlannedCheckpoint]:
    planned: dict[str, PlannedCheckpoint] = {}
    for index, checkpoint in enumerate(case.checkpoints):
        loc = ("checkpoints", index)
        if checkpoint.id in planned:
            problems.append(doc.problem((*loc, "id"), f"another checkpoint has id {checkpoint.id!r}"))
            continue
        if not checkpoint.assertion:
            problems.append(doc.problem((*loc, "assertion"), "a checkpoint needs an assertion"))
            continue
        try:
            assertion = mapping.to_engine(checkpoint.assertion, resolver)
        except AssertionProblem as exc:
            problems.append(doc.problem((*loc, "assertion", *exc.loc), exc.message, key=exc.at_key))
            continue
        assertion.label = f"checkpoint {checkpoint.id}"
        planned[checkpoint.id] = PlannedCheckpoint(checkpoint, assertion)
    ids = [c.id for c in case.checkpoints]
    for index, checkpoint in enumerate(case.checkpoints):
        for position, other in enumerate(checkpoint.after):
            where = ("checkpoints", index, "after", position)
            if other == checkpoint.id:
                problems.append(doc.problem(where, "a checkpoint cannot wait for itself"))
            elif other not in ids:
                problems.append(doc.problem(where, f"unknown checkpoint id {other!r} (ids: {', '.join(ids)})"))
    order, cycle = in_order(planned)
    if cycle:  # a cycle could never be reached
        index = next(i for i, c in enumerate(case.checkpoints) if c.id == cycle[0].spec.id)
        problems.append(doc.problem(("checkpoints", index, "after"), "checkpoints wait for each other in a cycle "
                                    f"and can never be reached: {', '.join(c.spec.id for c in cycle)}"))
    return order


def _simulator(case: TestCase, doc: JsonDocument, settings: ParseSettings,
               problems: list[Problem]) -> SimulatorRef | None:
    spec = case.simulator
    use = spec.use if spec is not None and spec.use else settings.default_simulator
    loc: Loc = ("simulator", "use") if spec is not None and spec.use else ("simulator",) if spec else ()
    config = spec.settings() if spec is not None else {}
    options = spec.options.sent() if spec is not None and spec.options is not None else {}
    connector = spec.options.connector if spec is not None and spec.options is not None else None
    resolver = settings.resolver
    if use is None:
        if spec is None and case.mode == "multi_turn":
            return None  # static turns only: when the agent still waits, a person or on_missing_input answers
        named: SimulatorRef | str = SimulatorRef("model", None, config, connector=connector) \
            if "simulator" in resolver.models or connector is not None else "no simulator: set simulator.use, " \
            "pass --simulator, or configure models.simulator in tamesu.yaml"
    else:
        named = simulator_named(use, resolver, config, connector)
    if isinstance(named, str):
        problems.append(doc.problem(loc, named))
        return None
    if named.kind == "script":  # a script is given the options as written: it has no model of its own to pick
        named.options = options
    elif why := connector_problem(named, connector, resolver):
        problems.append(doc.problem(("simulator", "options", "connector"), why))
        return None
    return named
