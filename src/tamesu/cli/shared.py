"""What `tamesu run` and `tamesu test` share on the command line: choosing tests, shards, the reports to write
and writing them after the run, the results store and tamesu's own spans, and the note an interrupted run
leaves."""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tamesu.errors import EXIT_CONFIG, EXIT_INFRA

if TYPE_CHECKING:
    from rich.console import Console

    from tamesu.jsonl.parser import ParseSettings
    from tamesu.models.cache import CacheMode
    from tamesu.plan import Plan, PlannedTest, Project
    from tamesu.plan.targets import ResolvedTarget
    from tamesu.report.spec import ReportRequest
    from tamesu.results.sharding import Shard
    from tamesu.runtime.signals import Interrupted
    from tamesu.store.db import Store
    from tamesu.store.lite import LiteStore
    from tamesu.store.writer import StoreWriter
    from tamesu.suite.secrets import Redactor, Secrets

F = TypeVar("F", bound=Callable[..., object])
"""A click command, given back with the options added."""

SUITE_PATH = click.Path(readable=False)
"""A suite file or folder: the loader tells an unreadable one as `file:1:1: cannot read the file`, as it tells
every other problem, where click's own check would stop at the first with a line of its own."""
CONFIG_PATH = click.Path(dir_okay=False, readable=False)
CONFIG_HELP = "The project file (default: the nearest tamesu.yaml)."
COLOR_HELP = "Colour the output: auto (on a terminal, unless NO_COLOR is set), always or never."
TOLERANCE_HELP = ("Metric changes smaller than this fraction of the baseline are not reported (default: "
                  "tamesu.yaml's report.tolerance, else 0.2).")


def select_tests(plan: Plan, pattern: str | None, tags: str | None) -> list[PlannedTest]:
    chosen = list(plan.tests)
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            click.echo(f"--filter: not a valid regular expression: {exc}", err=True)
            sys.exit(EXIT_CONFIG)
        chosen = [t for t in chosen if regex.search(t.id) or regex.search(t.name)]
    if tags is not None:
        wanted = split_tags(tags)
        if wanted is None:
            click.echo(f"--tags: {tags!r} opens a double quote it never closes", err=True)
            sys.exit(EXIT_CONFIG)
        if not wanted or any(not tag for _, tag in wanted):
            # `--tags ,,` (a shell variable left empty) ran every test, as if no --tags were given
            click.echo(f"--tags: no tag in {tags!r}: give tags separated by commas (!tag excludes one)", err=True)
            sys.exit(EXIT_CONFIG)
        include = {tag for without, tag in wanted if not without}
        exclude = {tag for without, tag in wanted if without}
        chosen = [t for t in chosen
                  if (not include or include & set(t.tags)) and not (exclude & set(t.tags))]
    return chosen


def no_match(plan: Plan, pattern: str | None, tags: str | None) -> str:
    """What `run` and `list` say when --filter or --tags chose no test, with what would have: the tag it is near
    (`--tags smok` of a suite tagged `smoke`), a filter that matches but for case, or the tests there are."""
    asked = " and ".join(f"{flag} {value}" for flag, value in (("--filter", pattern), ("--tags", tags)) if value)
    carried = sorted({tag for test in plan.tests for tag in test.tags})
    for _, tag in [pair for pair in split_tags(tags or "") or [] if not pair[0]]:
        if tag not in carried:
            close = difflib.get_close_matches(tag, carried, n=1)
            near = f"did you mean {close[0]!r}?" if close else f"tags: {_some(carried)}" if carried else \
                "no test has tags"
            return f"no test matches {asked}: no test is tagged {tag!r} ({near})"
    if pattern and tags is None:
        try:
            folded = re.compile(pattern, re.IGNORECASE)
        except re.error:
            folded = None
        if folded is not None and any(folded.search(t.id) or folded.search(t.name) for t in plan.tests):
            return f"no test matches {asked} (it matches ignoring case: --filter '(?i){pattern}')"
        return f"no test matches {asked} (tests: {_some([t.id for t in plan.tests])})"
    return f"no test matches {asked}"


def _some(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def split_tags(text: str) -> list[tuple[bool, str]] | None:
    """`--tags` as (without, tag) pairs: split at commas, each stripped, a leading `!` or `-` meaning "without".
    A tag in double quotes is taken as written, commas, spaces and a leading `!` included: a case named
    `Paris, France` is tagged `case:Paris, France`, chosen with `--tags '"case:Paris, France"'`. None: a quote
    left open. Items with nothing in them (`,,`) are left out; a lone `!` is kept as an empty tag, refused."""
    items, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            items.append(current)
            current = ""
        else:
            current += char
    if quoted:
        return None
    pairs = []
    for item in [*items, current]:
        written = item.strip()
        if not written:
            continue
        without = written.startswith(("!", "-"))
        tag = written[1:].strip() if without else written
        if len(tag) >= 2 and tag.startswith('"') and tag.endswith('"'):
            tag = tag[1:-1]
        pairs.append((without, tag))
    return pairs


def parse_shard(text: str | None) -> Shard | None:
    """`--shard K/N` parsed, or exit 2 saying what is wrong."""
    if text is None:
        return None
    import os

    from tamesu.results.sharding import Shard, ShardError

    try:
        return Shard.from_environment(os.environ) if text == "auto" else Shard.parse(text)
    except ShardError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)


def report_requests(cli_value: str | None, project: Project | None, *,
                    default: bool = True) -> list[ReportRequest]:
    """`--report` (paths from the current folder) wins over `report:` in tamesu.yaml (paths from its folder);
    `default=False` ignores the default (the HTML report) when tamesu.yaml does not name reports."""
    from tamesu.report.spec import ReportSpecError, parse_reports

    try:
        if cli_value is not None:
            return parse_reports(cli_value, Path.cwd())
        if project is not None and (default or "formats" in project.spec.report.model_fields_set):
            return parse_reports(project.spec.report.formats, project.dir)
    except ReportSpecError as exc:
        click.echo(f"--report: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    return []


def to_stdout(requests: list[ReportRequest]) -> bool:
    """A report goes to standard output (`json:-`): the console then writes to standard error, so that
    `--report json:- | jq` reads the report alone."""
    from tamesu.report.emit import STDOUT

    return any(request.path == STDOUT for request in requests)


def finish_reports(run_dir: Path, requests: list[ReportRequest], baseline: Path | None, tolerance: float,
                    console: Console, code: int) -> int:
    """Compare with the baseline, write every report; a report that cannot be written is exit 3.

    Runs after the console's summary, so the comparison reads as its last lines."""
    from tamesu.report.baseline import console_lines
    from tamesu.report.emit import compare_with, stored_comparison, write_reports
    from tamesu.report.load import RunDirError, load_run, shown_path

    try:
        run = load_run(run_dir)
    except RunDirError as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_INFRA
    for problem in run.problems:
        console.print(f"[yellow]warning:[/] {problem}", highlight=False, markup=True)
    comparison = None
    if baseline is not None:
        try:
            comparison, unkept = compare_with(run, baseline, tolerance)
        except RunDirError as exc:
            # the first run of a project has nothing to compare with: say so, and carry on
            console.print(f"warning: baseline: {exc}", style="yellow", highlight=False, markup=False)
        else:
            console.print("")
            for style, line in console_lines(comparison):
                console.print(line, style=style, highlight=False, markup=False)
            if unkept:
                console.print(f"warning: baseline: {unkept}", style="yellow", highlight=False, markup=False)
    else:
        comparison = stored_comparison(run)
    emitted = write_reports(run, requests, comparison)
    for kind, path in emitted.written:
        if path is not None:
            console.print(f"{kind} report: {shown_path(path)}", style="dim", highlight=False, markup=False)
    for error in emitted.errors:
        click.echo(f"error: {error}", err=True)
    if emitted.errors and code in (0, 1, EXIT_CONFIG):  # 3 is worse than a suite's 2, not than 4 or a signal's
        return EXIT_INFRA
    return code


def start_telemetry(console: Console) -> bool:
    """tamesu's own spans, when OTEL_EXPORTER_OTLP_ENDPOINT is set (nothing is imported otherwise)."""
    from tamesu import __version__
    from tamesu.telemetry import otel as _otel

    if not _otel.configured():
        return False
    try:
        _otel.start(__version__)
    except ImportError:
        console.print(f"warning: {_otel.OTEL_HINT}", style="yellow", highlight=False, markup=False)
        return False
    return True


def stop_telemetry(started: bool) -> None:
    if started:
        from tamesu.telemetry import otel as _otel

        _otel.stop()


def open_store_writer(project: Project, redactor: Redactor, origin: Any, shard: str | None,
                      console: Console) -> StoreWriter | None:
    """The reporter that writes every finished test to the results store, or None when none is configured.

    A store configured without its extra is exit 2 before anything runs; a store that is down is only a
    warning, printed when the first write fails. The default store (none configured) that cannot be made (a
    read-only folder) is a warning too: history is a convenience, never a reason for a run not to run."""
    from tamesu.store import StoreError, is_default, store_url

    try:
        url = store_url(project.spec.store, project.dir)
    except StoreError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    if url is None:
        return None

    def warn(message: str) -> None:
        console.print(f"warning: {message}", style="yellow", highlight=False, markup=False)

    try:
        from tamesu.store.lite import open_lite
        from tamesu.store.writer import StoreWriter

        # a current or new SQLite store is written without SQLAlchemy (its import was half the store's cost to
        # a run); migrating an older one, or PostgreSQL, takes the full writer
        store: Store | LiteStore | None = open_lite(url)
        if store is None:
            from tamesu.store import db

            store = db.Store(url)
    except (StoreError, OSError) as exc:
        if is_default(project.spec.store):
            reason = f"cannot create {project.dir / '.tamesu'}: {exc.strerror or exc}" if isinstance(exc, OSError) \
                else str(exc)
            warn(f"history is off for this run: {reason} (`store: false` in tamesu.yaml if you want none)")
            return None
        if isinstance(exc, OSError):
            # a store that cannot be written is a warning (docs/store.md), here as when a write fails: the run
            # runs, and `tamesu store import` fills the store in later (it was a bare "[Errno 2] ..." and exit 2)
            from tamesu.store import password_hidden

            warn(f"store: cannot write to {password_hidden(url)}: {exc.strerror or exc}; history is off for this run "
                 "(`tamesu store import RUN_DIR` adds it later)")
            return None
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)

    return StoreWriter(store, origin, project_dir=project.dir, shard=shard, redact=redactor.data, warn=warn,
                       secret_in=redactor.in_json)


COLOR = click.Choice(["auto", "always", "never"])


def run_options(tests: str, *, ids: str, verbose: str, parallel: str, tags: str = "",
                repeat: str = "") -> Callable[[F], F]:
    """The options `tamesu run` and `tamesu test` share, declared once: which tests, how they run, where their
    results go. `tests` names what runs ("tests", "test cases"), `ids` what --filter matches, `verbose` what -v
    shows, `parallel` where --parallel's default comes from; `tags` and `repeat` add what only one command has
    to say."""
    options = [
        click.option("--filter", "pattern", metavar="REGEX", help=f"Run only {tests} whose {ids} matches."),
        click.option("--tags", metavar="TAGS", help=f"Comma-separated tags to run{tags}; !tag excludes."),
        click.option("--parallel", "-p", type=click.IntRange(1, 10000),
                     help=f"Runs at the same time (default: {parallel})."),
        click.option("--repeat", type=click.IntRange(1, 10000), help=f"Run every {tests.removesuffix('s')} N "
                     f"times{repeat}."),
        click.option("--out", type=click.Path(file_okay=False), help="Where run directories go (default: "
                     "tamesu.yaml's out, else tamesu-runs)."),
        click.option("--fail-fast", is_flag=True, help=f"Stop starting {tests} after the first failure."),
        click.option("--color", type=COLOR, default="auto", show_default=True, help=COLOR_HELP),
        click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP),
        click.option("-v", "--verbose", count=True, help=verbose),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the replay cache of model calls."),
        click.option("--cache-only", is_flag=True, help="Answer every model call from the replay cache; a miss "
                     "fails."),
        click.option("--update-golden", is_flag=True, help="golden assertions write what they saw instead of "
                     "comparing."),
        click.option("--report", "reports", metavar="SPECS", multiple=True, callback=joined_reports,
                     help="Reports to write: junit[:PATH],html[:PATH],json[:PATH],markdown[:PATH],github "
                          "(and plug-ins' formats); given twice, both (default: tamesu.yaml's report, else html "
                          "in the run directory)."),
        click.option("--baseline", type=click.Path(file_okay=False),
                     help="Compare with an earlier run directory (or the newest run in a folder of runs; "
                          "default: tamesu.yaml's report.baseline)."),
        click.option("--tolerance", type=click.FloatRange(0), metavar="FRACTION", help=TOLERANCE_HELP),
        click.option("--shard", "shard_text", metavar="K/N",
                     help=f"Run only the K-th of N stable shards of the {tests}; `auto` reads a Kubernetes "
                          "Indexed Job's JOB_COMPLETION_INDEX and TAMESU_SHARD_COUNT."),
    ]

    def declare(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return declare


def cache_mode(no_cache: bool, cache_only: bool, said: str = "") -> CacheMode | None:
    """--no-cache and --cache-only as the replay cache's mode; both at once is a usage error (exit 2), said
    after `said` (the command's name)."""
    if no_cache and cache_only:
        click.echo(f"{said}--no-cache and --cache-only contradict each other: choose one", err=True)
        sys.exit(EXIT_CONFIG)
    return "off" if no_cache else "only" if cache_only else None


def interrupted_note(stop: Interrupted, run_dir: Path | None) -> str:
    """What an interrupted run left, naming only files that exist."""
    if run_dir is None:
        return f"{stop}: no test had started"
    results = run_dir / "results.jsonl"
    finished = sum(1 for line in results.read_text(encoding="utf-8").splitlines() if line.strip()) \
        if results.is_file() else 0
    kept = [name for name in ("results.jsonl", "run.json", "plan.json") if (run_dir / name).is_file()]
    planned = _planned_count(run_dir)
    of = f" of {planned} planned" if planned is not None else ""
    return (f"{stop}: {finished}{of} test{'' if (planned or finished) == 1 else 's'} finished, kept in {run_dir}"
            + (f" ({', '.join(kept)})" if kept else ""))


def _planned_count(run_dir: Path) -> int | None:
    try:
        return len(json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))["tests"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def parse_settings(project: Project, secrets: Secrets, base_dir: Path, resolved: ResolvedTarget | None, *,
                   simulator: str | None = None, connector: str | None = None,
                   yao_errors: bool = False) -> ParseSettings:
    """How `tamesu test` and `tamesu validate` read JSONL cases, so the two never disagree: what a case may name
    (the project's models and targets, scripts beside the file, the project or the current folder) and what
    the agent under test can take."""
    from tamesu.engine.live import TargetHelper
    from tamesu.jsonl.parser import ParseSettings
    from tamesu.plan import load_project_targets
    from tamesu.plan.targets import Resolver, file_refusal, history_refusal

    specs = load_project_targets(project)[0] if project.spec.targets else {}
    resolver = Resolver(models=set(project.spec.models), targets=set(specs),
                        search=list(dict.fromkeys([base_dir, project.dir, Path.cwd()])),
                        helpers={n: TargetHelper(n, s, secrets, project.dir) for n, s in specs.items()})
    return ParseSettings(
        resolver, default_simulator=simulator, file_dirs=[project.dir],
        file_refusal=file_refusal(resolved, project, connector) if resolved is not None else None,
        target_type=resolved.spec.type if resolved is not None else None, traced=project.spec.traces is not None,
        history_refusal=history_refusal(resolved.spec.type, resolved.name) if resolved is not None else None,
        yao_errors=yao_errors or project.spec.yao_errors)


def settle_for(at_once: int, console: Console) -> None:
    """This process made ready for a run of `at_once` conversations at once, as `run` and `test` start one: the
    heap frozen (`engine.heap`), the limit on open files raised (`runtime.open_files`, a warning when too low)."""
    from tamesu.engine.heap import settle_for_a_run
    from tamesu.runtime.open_files import allow_open_files

    settle_for_a_run(at_once)
    if (too_few := allow_open_files(at_once)) is not None:
        console.print(f"[yellow]warning:[/] {too_few}", highlight=False, markup=True)


def point_to_view(store_writer: StoreWriter | None, console: Console) -> None:
    """The run's last line, once the store holds two runs or more: where its history is seen."""
    if store_writer is None or store_writer.runs_stored < 2:
        return
    console.print(f"history: {store_writer.runs_stored} runs in {store_writer.store.shown.removeprefix('sqlite:///')}; "
                  "`tamesu view` shows them (flaky tests, trends, comparisons)", style="dim", highlight=False,
                  markup=False, soft_wrap=True)


def joined_reports(_context: object, _option: object, given: tuple[str, ...]) -> str | None:
    """`--report json --report junit` as `--report json,junit`: click kept only the last one given."""
    return ",".join(given) if given else None
