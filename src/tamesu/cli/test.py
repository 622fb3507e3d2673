"""`tamesu test`: JSONL test cases (a file, one message, or generated) against one agent, through the engine.

Kept apart from `cli.py` so the command can grow without touching the others; `cli.py` registers it with
`main.add_command(test_command)`. Until then `python -m tamesu.cli.test ...` runs it alone.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import click

from tamesu.cli.shared import cache_mode, run_options
from tamesu.errors import EXIT_CONFIG, EXIT_INFRA, ConfigError, InfraError, Problem, SuiteProblem
from tamesu.models.base import ModelError
from tamesu.plan.project import label as file_label

if TYPE_CHECKING:  # the command imports what it runs on first use, so `tamesu --help` stays quick
    from tamesu.jsonl.parser import ParsedCase, ParseSettings
    from tamesu.jsonl.run import JsonlFile
    from tamesu.jsonl.sources import InputSource
    from tamesu.plan import Project
    from tamesu.plan.targets import ResolvedTarget, Resolver
    from tamesu.suite.secrets import Secrets

MISSING = click.Choice(["skip", "fail", "end"])


def _fail(problems: list[Problem]) -> None:
    for problem in problems:
        click.echo(str(problem), err=True)
    click.echo(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found", err=True)
    sys.exit(EXIT_CONFIG)


class _Usage(Exception):
    """What the command line asks for cannot be done (exit 2)."""


def _usage(message: str) -> None:
    click.echo(f"tamesu test: {message}", err=True)
    sys.exit(EXIT_CONFIG)


def _duration(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    from tamesu.types import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if seconds <= 0:  # no case could ever finish
        raise click.BadParameter(f"a timeout is more than 0s, got {value!r}")
    return seconds


@click.command("test", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-i", "--input", "source", required=True, metavar="INPUT",
              help="A JSONL file or folder, - (JSONL on stdin), a message, "
                   "agents:MODEL?count=N&focus=..&complexity=.., or scripts:MODULE:FUNC?k=v.")
@click.option("-n", "--name", "target", metavar="TARGET",
              help="The agent under test: a target of tamesu.yaml, or a URL: http(s):// (an A2A card there makes it "
                   "A2A, else rest) or grpc(s):// (tamesu's turn API).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write one JSON record per test case here "
              "(with --dry-run: the test cases).")
@click.option("-c", "--connector", help="The model a model target uses (a name under models:, or provider:model); "
              "other targets get it as options.connector.")
@click.option("--interactive", is_flag=True, help="Ask a person (stdin) for input no turn gives.")
@click.option("--skip-interactive", is_flag=True, help="Never ask a person, even for cases with interactive.enabled.")
@click.option("--simulator", metavar="MODEL", help="The simulator for cases that name none, and for cases of one "
              "input message (it answers while the agent awaits input): a model under models: (agents:NAME or NAME), "
              "a target of tamesu.yaml, or scripts:MODULE:FUNC.")
@click.option("--timeout", default="5m", show_default=True, callback=_duration, help="Per test case.")
@click.option("--dry-run", is_flag=True, help="Parse (or generate) the test cases and show them; run nothing.")
@click.option("--on-missing-input", type=MISSING, help="When the agent awaits input nothing can give: skip the case "
              "(the default), fail it, or end the conversation and grade it.")
@click.option("--yao-errors", is_flag=True, help="The agent test design's error classes (or yao_errors: true in "
              "tamesu.yaml): an agent that fails (unreachable) fails its case, a simulator error skips a multi-turn "
              "case and fails a dynamic one, a case with no initial input loads and is the suite's error (exit 2) "
              "while the others run; tamesu's own: an error (exit 3), and exit 2 at load.")
@run_options("test cases", ids="id", verbose="Whole answers, and whether the agent awaited input after each turn.",
             parallel="tamesu.yaml's parallel, else 1",
             tags=" (mode:standard, mode:multi_turn, mode:dynamic)")
def test_command(**options: Any) -> None:
    """Run JSONL test cases (standard, multi-turn, dynamic) against one agent."""
    if options["interactive"] and options["skip_interactive"]:
        _usage("--interactive and --skip-interactive contradict each other: choose one")
    options["cache_mode"] = cache_mode(options.pop("no_cache"), options.pop("cache_only"), "tamesu test: ")
    from tamesu.runtime.signals import Interrupted, run_stoppable

    try:
        code = run_stoppable(_main(**options))
    except Interrupted as stop:
        click.echo(stop.said or f"{stop}: no test case had started", err=True)
        sys.exit(stop.exit_code)
    sys.exit(code)


async def _main(**options: Any) -> int:
    from tamesu.jsonl import sources
    from tamesu.plan import find_project, load_project
    from tamesu.plan.targets import TargetProblem, resolve
    from tamesu.suite.secrets import Secrets, mask_logging

    if not options["source"].strip():  # as a path, "" is the current folder: it would run every JSONL file there
        _usage(f"-i {options['source']!r} is empty: give a JSONL file, a folder, a message, agents:... or scripts:...")
    source = sources.parse_input(options["source"])
    named = [key for key, _ in parse_qsl(options["source"].partition("?")[2])] if source.params else []
    if twice := sorted({key for key in named if named.count(key) > 1}):  # dict() kept the last one, said nowhere
        _usage(f"-i {options['source']!r} gives {', '.join(twice)} more than once: give each once")
    if "" in source.params:  # `?=3`: it was "a model generator reads count, focus and complexity, not " and nothing
        _usage(f"-i {options['source']!r} gives a parameter without a name: write name=value (count=10)")
    if source.kind == "agents" and not source.value:
        _usage(f"-i {options['source']!r} names no generator: write agents:NAME, a model under models: or a target")
    where = Path(source.value) if source.kind in ("file", "folder") else Path.cwd()
    try:
        config = options["config"]
        project = load_project(Path(config) if config else find_project(where), Path.cwd())
    except ConfigError as exc:
        _fail(exc.problems)
    secrets = Secrets(project.dir / name for name in project.spec.secrets.env_files)
    if project.doc is not None:
        secrets.mask_named(project.doc.data)
    mask_logging(secrets.redactor)  # a library's log line must not show a secret either
    if source.kind == "stdin" and options["interactive"]:
        _usage("-i - reads the test cases from stdin, where --interactive would ask a person: give the cases "
               "as a file to answer the agent yourself")
    if source.kind not in ("file", "stdin") and options["target"] is None:
        _usage("-n is needed with a message or generated test cases: name the agent to test")
    from tamesu.cli._outputs import check_outputs
    from tamesu.cli.shared import report_requests

    refused, overwrites = check_outputs(source, options["output"], report_requests(options["reports"], project))
    if refused is not None:
        _usage(refused)
    for overwrite in overwrites:
        click.echo(f"warning: {overwrite}", err=True)
    try:
        resolved, warnings = await resolve(options["target"], project, secrets, None if config else where)
    except TargetProblem as exc:
        _usage(str(exc))
    except ConfigError as exc:
        _fail(exc.problems)
    for warning in [*secrets.warnings, *warnings]:
        click.echo(f"warning: {warning}", err=True)
    from tamesu.plan.targets import unknown_model

    if resolved.spec.type == "model" and (why := unknown_model(options["connector"], project.spec.models)):
        _usage(f"-c {options['connector']}: {why}")  # the model every case's answers come from
    try:
        cases, label, base_dir = await _cases(source, project, resolved, secrets, options)
    except ConfigError as exc:
        _fail(exc.problems)
    except _Usage as exc:
        _usage(str(exc))
    except SuiteProblem as exc:  # the project's own generator script raised or answered no test cases
        click.echo(f"tamesu test: {exc}", err=True)
        return EXIT_CONFIG
    except (InfraError, ModelError) as exc:
        click.echo(f"tamesu test: {exc}", err=True)
        return EXIT_INFRA
    from tamesu.plan.targets import dropped_options, voice_warnings

    for voice_warning in voice_warnings(cases, resolved.name, resolved.spec) if resolved is not None else []:
        click.echo(f"warning: {voice_warning}", err=True)
    if options["connector"] and (dropped := dropped_options(resolved.spec.type, ["connector"])) is not None:
        click.echo(f"warning: -c {options['connector']}: {dropped}", err=True)
    if options["dry_run"]:
        secrets.mask_named([parsed.case.as_json() for parsed in cases])  # a generated case's secrets too
        return _dry_run(cases, label, resolved, options, secrets, folder=source.kind == "folder")
    return await _run(cases, label, base_dir, source, project, secrets, resolved, options)


async def _cases(source: InputSource, project: Project, resolved: ResolvedTarget, secrets: Secrets,
                 options: dict[str, Any]) -> tuple[list[ParsedCase], str, Path]:
    """The parsed cases, how the header names their source, and the folder their relative paths start from."""
    from tamesu.cli.shared import parse_settings

    base_dir = Path(source.value).parent.resolve() if source.kind == "file" else \
        Path(source.value).resolve() if source.kind == "folder" else Path.cwd()
    settings = parse_settings(project, secrets, base_dir, resolved, simulator=options["simulator"],
                              connector=options["connector"], yao_errors=options["yao_errors"])
    resolver = settings.resolver
    if options["connector"] and resolved.spec.type == "model":  # the model that answers: one of the project's
        try:
            resolver.model_for(options["connector"])
        except ValueError as exc:
            raise _Usage(f"-c {options['connector']}: {exc}") from None
    if options["simulator"]:  # told once, and even when every case names its own
        from tamesu.plan.simulators import simulator_named

        if isinstance(named := simulator_named(options["simulator"], resolver), str):
            raise _Usage(f"--simulator {options['simulator']}: {named}")
    try:
        return await _parsed(source, project, resolved, secrets, options, resolver, settings, base_dir)
    finally:
        for warning in settings.warnings:
            click.echo(f"warning: {warning}", err=True)


async def _parsed(source: InputSource, project: Project, resolved: ResolvedTarget, secrets: Secrets,
                  options: dict[str, Any], resolver: Resolver, settings: ParseSettings,
                  base_dir: Path) -> tuple[list[ParsedCase], str, Path]:
    from tamesu.checks.functions import load_function
    from tamesu.jsonl import generator, parser, sources

    if source.kind == "file":
        label = file_label(Path(source.value))
        return parser.parse_file(Path(source.value), label, settings), label, base_dir
    if source.kind == "folder":
        return _folder_cases(Path(source.value), settings), file_label(Path(source.value)), base_dir
    if source.kind == "stdin":
        cases = parser.parse_text(sources.read_stdin(), "stdin", base_dir, settings)
        if not cases:
            raise ConfigError([Problem("stdin", 1, 1, "", "no test cases on stdin")])
        return cases, "stdin", base_dir
    if source.kind == "message":
        return parser.parse_objects([{"id": "message", "input": source.value}], "message", base_dir,
                                    settings), "message", base_dir
    about = generator.describe(resolved.name, resolved.spec)
    try:
        if source.kind == "scripts":
            function = load_function(source.value, resolver.search, "generate")
            made = await generator.from_script(function, source.value, about, source.params)
        else:
            made = await _from_agent(source, project, secrets, about, resolver, options)
    except ValueError as exc:
        raise _Usage(f"-i {source.text}: {exc}") from None
    return parser.parse_objects(made, source.text, base_dir, settings), source.text, base_dir


def _folder_cases(folder: Path, settings: ParseSettings) -> list[ParsedCase]:
    """The cases of every JSONL file directly in `folder`, file by file in name order; the problems of all
    files at once. A case id is unique in its file only: two files may both have `lost-order`."""
    from tamesu.jsonl import parser
    from tamesu.plan.project import jsonl_in_folder, readable_folder

    readable_folder(folder)
    files = jsonl_in_folder(folder)
    label = file_label(folder)
    if not files:
        raise ConfigError([Problem(label, 1, 1, "", "no JSONL files in the folder (.jsonl or .ndjson)")])
    cases: list[ParsedCase] = []
    problems: list[Problem] = []
    for path in files:
        try:
            cases += parser.parse_file(path, file_label(path), settings)
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)
    return cases


async def _from_agent(source: InputSource, project: Project, secrets: Secrets, about: dict[str, Any],
                      resolver: Resolver, options: dict[str, Any]) -> list[object]:
    """`agents:NAME`: a model under `models:` writes the cases, or else a target of tamesu.yaml."""
    from tamesu.engine.models import project_models
    from tamesu.jsonl import generator

    name = source.value
    helper = resolver.helper(name)
    if name not in project.spec.models and ":" not in name and helper is None:
        known = ", ".join(project.spec.models) or "none configured"
        targets = ", ".join(resolver.helpers) or "none"
        raise ValueError(f"no model or target named {name!r} to generate test cases (models: {known}; "
                         f"targets: {targets})")
    registry = project_models(project, secrets, options["cache_mode"])
    try:
        if helper is not None:
            return await generator.from_target(helper, about, source.params, registry)
        if registry is None:
            raise ValueError("generating test cases needs a model: configure models in tamesu.yaml")
        return await generator.from_model(registry.client("generator", name), about, source.params)
    finally:
        if registry is not None:
            await registry.aclose()


def _counted(number: int, what: str) -> str:
    return f"{number} {what}{'' if number == 1 else 's'}"


def _dry_run(cases: list[ParsedCase], label: str, resolved: ResolvedTarget, options: dict[str, Any],
             secrets: Secrets, *, folder: bool = False) -> int:
    from tamesu.jsonl.parser import written_in
    from tamesu.report.console import make_console

    if options["output"] and folder:  # one file of them would not load: "another test case has id 'greet'"
        files: dict[str, list[str]] = {}
        for parsed in cases:
            files.setdefault(parsed.case.id, []).append(parsed.doc.label)
        if shared := [f"{key} ({', '.join(labels)})" for key, labels in files.items() if len(labels) > 1]:
            _usage(f"-o {options['output']}: the folder's files share case ids ({'; '.join(shared[:5])}), which one "
                   "file cannot hold: give -i one file at a time")
    console = make_console(options["color"])
    console.print(f"Agent: {resolved.about}", soft_wrap=True, markup=False)
    console.print(f"Input: {label} ({len(cases)} test case{'s' if len(cases) != 1 else ''}), not run (--dry-run)",
                  soft_wrap=True, markup=False)
    for parsed in cases:
        case = parsed.case
        count = len(parsed.final) + sum(len(v) for v in parsed.turn_assertions.values())
        shape = _counted(len(case.turns), "turn") if case.turns else f"{len(case.input or [])} message(s)"
        if case.checkpoints:
            shape = _counted(len(case.checkpoints), "checkpoint")
        shown = f"{parsed.doc.label}: {case.id}" if folder else case.id
        named = f" {case.name}" if case.name else ""
        console.print(secrets.redactor.text(f"  [{shown}]{named}: {case.mode}, {shape}, {count} assertion(s)"),
                      soft_wrap=True, markup=False)
    if options["output"]:
        path = Path(options["output"])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # a generated case holds what its generator wrote: a secret's value is written as its reference
            path.write_text("".join(json.dumps(secrets.as_references(written_in(p, path.parent)), ensure_ascii=False)
                                    + "\n" for p in cases), encoding="utf-8")
        except OSError as exc:
            click.echo(f"tamesu test: cannot write -o {path}: {exc.strerror or exc}", err=True)
            return EXIT_INFRA
        console.print(f"wrote {len(cases)} test case(s) to {path}", soft_wrap=True, markup=False)
    return 0


async def _run(cases: list[ParsedCase], label: str, base_dir: Path, source: InputSource, project: Project,
               secrets: Secrets, resolved: ResolvedTarget, options: dict[str, Any]) -> int:
    """The cases on the engine, as `tamesu run` runs a suite: the same selection, run directory and reports."""
    from tamesu.cli.jsonl_runner import JsonlRunner
    from tamesu.cli.shared import (
        finish_reports,
        interrupted_note,
        open_store_writer,
        parse_shard,
        point_to_view,
        report_requests,
        select_tests,
        settle_for,
        start_telemetry,
        stop_telemetry,
        to_stdout,
    )
    from tamesu.jsonl.run import JsonlFile, JsonlPlan, TestSettings
    from tamesu.report.case_console import TestConsole
    from tamesu.report.console import make_console
    from tamesu.results.provenance import provenance
    from tamesu.results.sharding import select, selection
    from tamesu.runtime.gc_pause import collector_paused
    from tamesu.runtime.signals import Interrupted

    # no cyclic collection walks the cases' plan while the run is set up: on again once it is frozen
    paused = contextlib.ExitStack()
    paused.enter_context(collector_paused())
    name = Path(source.value).stem if source.kind == "file" else \
        Path(source.value).resolve().name if source.kind == "folder" else source.kind
    path = Path(source.value).resolve() if source.kind == "file" else None
    parts = _files(cases) if source.kind == "folder" else [JsonlFile(name, path, cases, label)]
    plan = JsonlPlan(project=project, secrets=secrets, target=resolved, base_dir=base_dir, parts=parts,
                     folder=source.kind == "folder")
    out = Path(options["out"]).expanduser() if options["out"] else project.dir / project.spec.out
    shard = parse_shard(options["shard_text"])
    requests = report_requests(options["reports"], project)
    settings = TestSettings(out=out, parallel=options["parallel"] or project.spec.parallel,
                            fail_fast=options["fail_fast"],
                            timeout=options["timeout"], connector=options["connector"],
                            on_missing_input=options["on_missing_input"], interactive=options["interactive"],
                            skip_interactive=options["skip_interactive"], cache_mode=options["cache_mode"],
                            output=Path(options["output"]) if options["output"] else None,
                            repeat=options["repeat"], update_golden=options["update_golden"],
                            shard=str(shard) if shard else None,
                            yao_errors=options["yao_errors"] or project.spec.yao_errors)
    if settings.output is not None:
        refused = _unwritable(settings.output)
        if refused:
            click.echo(f"tamesu test: cannot write -o {settings.output}: {refused}", err=True)
            return EXIT_INFRA
    rich_console = make_console(options["color"], stderr=to_stdout(requests))
    console = TestConsole(rich_console, secrets.redactor, options["verbose"])
    origin = provenance(project.dir, own=(settings.out, project.dir / ".tamesu"))
    # the same store and the same records as `tamesu run`: each case is written as it finishes
    store_writer = open_store_writer(project, secrets.redactor, origin, settings.shard, rich_console)
    runner = JsonlRunner(plan, settings, console, provenance=origin,
                         also=[store_writer] if store_writer is not None else [])
    tests = select_tests(runner.engine_plan, options["pattern"], options["tags"])
    if not tests:
        _usage("no test case matches the filter")
    chose = selection(t.id for t in tests) if shard is not None else None
    if shard is not None:
        tests = select(tests, shard)
    modes: set[str] = {runner.planner.cases[t.id].parsed.case.mode for t in tests}
    console.start(resolved.about, label, len(tests), modes)
    # this process is the run's: what was made before it lives to its end (see _heap)
    settle_for(min(settings.parallel, max(1, len(tests))), rich_console)
    paused.close()
    telemetry = start_telemetry(rich_console)
    report = project.spec.report
    try:
        outcome = await runner.run(tests, chose)
    except InfraError as exc:  # the run folder, a traces receiver or backend: before any test ran
        click.echo(f"tamesu test: {exc}", err=True)
        return EXIT_INFRA
    except Interrupted as stop:
        run_dir = runner.engine.run_dir if runner.engine is not None else None
        stop.said = interrupted_note(stop, run_dir) + (
            f"; the finished test cases are in {settings.output}" if settings.output is not None else "")
        if requests and run_dir is not None and (run_dir / "run.json").is_file():
            # a CI job cancelled or timed out still gets the reports it asks for, of what finished
            tolerance = report.tolerance if options["tolerance"] is None else options["tolerance"]
            finish_reports(run_dir, requests, None, tolerance, rich_console, stop.exit_code)
        raise
    finally:
        if store_writer is not None:
            store_writer.close(timeout=5)  # at once after a finished run; bounded when it was stopped
        stop_telemetry(telemetry)
    console.finish(outcome.records, outcome.summary.duration_ms / 1000, outcome.run_dir, settings.output,
                   outcome.summary.stopped, outcome.along_the_way)
    baseline = Path(options["baseline"]) if options["baseline"] else \
        (project.dir / report.baseline if report.baseline else None)
    code = outcome.exit_code
    if requests or baseline is not None:
        tolerance = report.tolerance if options["tolerance"] is None else options["tolerance"]
        code = finish_reports(outcome.run_dir, requests, baseline, tolerance, rich_console, code)
    point_to_view(store_writer, rich_console)
    return code


def _unwritable(path: Path) -> str | None:
    """Why `-o` cannot be written (a read-only folder, a full disk), found before any case runs."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            handle.write("")
    except OSError as exc:
        return str(exc.strerror or exc)
    return None


def _files(cases: list[ParsedCase]) -> list[JsonlFile]:
    """`-i FOLDER`: the cases grouped by the file they came from (in the order read), one suite each."""
    from tamesu.jsonl.run import JsonlFile

    by_file: dict[str, list[ParsedCase]] = {}
    for parsed in cases:
        by_file.setdefault(parsed.doc.label, []).append(parsed)
    labels = list(by_file)
    paths = [Path(label) for label in labels]
    return [JsonlFile(name, path.resolve(), by_file[label], label)
            for name, path, label in zip(file_names(paths), paths, labels, strict=True)]


def file_names(paths: list[Path]) -> list[str]:
    """The suite name of each JSONL file of a folder: its stem, or its whole name when another file of the
    folder has the same stem (`a.jsonl` and `a.ndjson`), so no two files' test ids can meet."""
    stems = [path.stem for path in paths]
    return [path.stem if stems.count(path.stem) == 1 else path.name for path in paths]


def main() -> None:
    """`python -m tamesu.cli.test`: the command alone; a bug of ours is one line and exit 3."""
    from tamesu.cli.main import entry

    entry(test_command)


if __name__ == "__main__":
    main()
