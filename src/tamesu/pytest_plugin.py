"""The pytest plugin: suite files become pytest items, so `pytest` runs tamesu tests beside unit tests.

Each test of a suite (each case too) is one item named after it, so `-k`, `-m <tag>`, `--junitxml`, `-x` and
pytest-xdist's `-n 4` work as for any test (a tag named as pytest's or a plug-in's marker, `skip`, is none).
Collected files: `*.tamesu.yaml` by default, or the globs of the `tamesu_files` ini option (matched against the end
of the path, so `suites/*.yaml` works too); the project file `tamesu.yaml` never is. Outcomes: passed passes; failed
and error fail with every failing assertion's reason and the transcript; skipped skips; a quarantined failure is an
expected failure (xfail), which JUnit files show as skipped with the failure in the message, as tamesu's own JUnit
report does.

Each item is a tamesu run of its own (its own run directory, under `<out>/pytest-<session>/`, shared by
every xdist worker of one session; `tamesu merge` joins them into one run). Because of that, a suite's
`before_all`/`after_all` hooks and the `budget` apply to each item, not once per suite: xdist spreads a
suite's tests over processes, so "once per suite" could not hold anyway. A suite's `load:` stages are not run (a
warning says so): each item would ramp its one test alone, for the whole ramp, with nowhere to show the figures.
"""

from __future__ import annotations

import datetime as dt
import secrets
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tamesu.errors import ConfigError

if TYPE_CHECKING:  # the engine's types, named for the reporter protocol only
    from tamesu.plan import Plan, PlannedTest
    from tamesu.results.records import RunResult, RunSummaryFile, TestResult

_SESSION = pytest.StashKey[str]()
_WORKER_KEY = "tamesu_session"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tamesu", "tamesu suites as pytest items")
    group.addoption("--tamesu-out", dest="tamesu_out", metavar="DIR", default=None,
                    help="Where tamesu writes its run directories (default: the project's `out`).")
    group.addoption("--tamesu-config", dest="tamesu_config", metavar="FILE", default=None,
                    help="The tamesu project file (default: the nearest tamesu.yaml above each suite).")
    parser.addini("tamesu_files", type="args", default=["*.tamesu.yaml"],
                  help="Globs of the files collected as tamesu suites (default: *.tamesu.yaml).")
    parser.addini("tamesu_out", default="", help="Default of --tamesu-out.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tamesu: a test of a tamesu suite")
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None and _WORKER_KEY in worker_input:
        config.stash[_SESSION] = worker_input[_WORKER_KEY]
    else:
        config.stash[_SESSION] = f"pytest-{dt.datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller: every worker writes into the controller's session folder."""
    node.workerinput[_WORKER_KEY] = node.config.stash[_SESSION]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("tamesu_files")
    if not any(file_path.match(pattern) for pattern in patterns):
        return None
    # only now: importing the loader costs some 0.7 s of CPU, which every pytest run of a project that has
    # tamesu installed paid at its first collected file, suites or none
    from tamesu.plan import PROJECT_FILE

    if file_path.name == PROJECT_FILE:
        return None
    return SuiteFile.from_parent(parent, path=file_path)


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from tamesu.plan import load_plan

        config_option = self.config.getoption("tamesu_config")
        project = Path(config_option) if config_option else None
        try:
            plan = load_plan([self.path], project, require_secrets=True)
        except ConfigError as exc:
            raise self.CollectError(str(exc)) from None
        for warning in plan.warnings:
            self._warn_at(f"tamesu: {_under_pytest(str(warning))}", Path(warning.file), warning.line)
        for suite in plan.suites:
            if suite.spec.load is not None:  # each item would ramp its one test for the whole ramp, unseen
                self._warn_at(f"tamesu: suite {suite.name}: its load: stages are not run under pytest (each item "
                              "is one test's verdict): `tamesu run` runs them", suite.doc.path,
                              suite.doc.position(("load",))[0])
        theirs = _others_markers(self.config)
        for test in plan.tests:
            item = TamesuItem.from_parent(self, name=test.name, plan=plan, planned=test)
            item.add_marker(pytest.mark.tamesu)
            for tag in test.tags:
                if tag in theirs:
                    # `skip`, `xfail`, `timeout`...: as a marker it would skip the test, or stop the session
                    item.extra_keyword_matches.add(tag)  # `-k skip` still selects it
                    item.warn(pytest.PytestWarning(f"tamesu: {test.id}: tag {tag!r} is pytest's own marker (or a "
                                                   f"plug-in's), so it is no marker of this test: -k {tag} selects it"))
                elif tag.isidentifier():
                    # tags are markers too, so `-m smoke` selects as `--tags smoke` does
                    self.config.addinivalue_line("markers", f"{tag}: {_TAG}")
                    item.add_marker(getattr(pytest.mark, tag))
            if test.spec.skip:
                reason = test.spec.skip if isinstance(test.spec.skip, str) else "skip: true"
                item.add_marker(pytest.mark.skip(reason=reason))
            yield item


    def _warn_at(self, message: str, file: Path, line: int) -> None:
        """A warning at the line it is about: pytest's own `warn` puts a file's at FILE:0, its first line unknown."""
        path = file if file.is_absolute() else Path.cwd() / file
        warnings.warn_explicit(pytest.PytestWarning(message), category=None,
                               filename=str(path if path.is_file() else self.path), lineno=max(line, 1))


def _under_pytest(warning: str) -> str:
    """A plan's warning as a pytest user can act on it: this plug-in has no `--update-golden` of its own."""
    return warning.replace("a run with --update-golden writes it", _WRITE_GOLDEN)


_TAG = "tamesu tag"
_WRITE_GOLDEN = "`tamesu run --update-golden` writes it (pytest has no such option)"
"""What a missing golden file or baseline says under pytest, in the words of its warning (`_under_pytest`)."""


def _others_markers(config: pytest.Config) -> set[str]:
    """The markers pytest and its plug-ins registered (`skip`, `xfail`, `timeout`...), not tamesu's tags."""
    lines = [str(line) for line in config.getini("markers")]
    return {line.split(":")[0].split("(")[0].strip() for line in lines if not line.endswith(f": {_TAG}")}


class TamesuFailure(Exception):
    """A test that failed or errored; its text is what pytest shows."""


class TamesuItem(pytest.Item):
    def __init__(self, *, plan: Plan, planned: PlannedTest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.planned = planned

    def _out(self) -> Path:
        chosen = self.config.getoption("tamesu_out") or self.config.getini("tamesu_out")
        if chosen:
            base = Path(chosen)
            if not base.is_absolute():
                base = self.config.invocation_params.dir / base
        else:
            base = self.plan.project.dir / self.plan.project.spec.out
        return base / self.config.stash[_SESSION]

    def runtest(self) -> None:
        from tamesu.engine.runner import RunFolderError, Runner, RunOptions
        from tamesu.report.baseline import failure_reason
        from tamesu.report.junit import failure_text, transcript_lines
        from tamesu.report.load import load_run
        from tamesu.report.recorder import Fanout, PlanRecorder
        from tamesu.runtime.signals import Interrupted, run_stoppable

        options = RunOptions(out=self._out(), parallel=self.plan.project.spec.parallel, load=False,
                             write_golden=_WRITE_GOLDEN)
        reporter = Fanout(_Quiet(), PlanRecorder(None, self.plan.secrets.redactor.data))
        runner = Runner(self.plan, [self.planned], options, reporter)
        try:
            # stopped as the command line stops: the first Ctrl-C (SIGTERM, SIGHUP) ends the run in flight in
            # order and run.json says "interrupted by SIGINT" (under asyncio.run it was cancelled: "interrupted")
            outcome = run_stoppable(runner.run(), ends_run=False)  # speech workers kept warm
        except RunFolderError as exc:  # one line, as the command line says it (it was a traceback per item)
            raise TamesuFailure(f"tamesu: {exc}") from None
        except Interrupted as stop:
            kept = f": what finished is kept in {runner.run_dir}" if runner.run_dir is not None else ""
            if stop.signum == signal.SIGINT:  # pytest's own Ctrl-C: the session stops, its summary said
                raise KeyboardInterrupt(f"tamesu: {stop}{kept}") from None
            pytest.exit(f"tamesu: {stop}{kept}", returncode=stop.exit_code)
        if not outcome.results:
            raise TamesuFailure(f"the test did not run: {outcome.summary.stopped or outcome.summary.interrupted}")
        result = outcome.results[0]
        if result.status == "passed":
            return
        # the results in memory hold what the agent said as it said it: masked as the run's files are
        mask = self.plan.secrets.redactor.text
        if result.status == "skipped":
            pytest.skip(mask(result.skip_reason or "skipped"))
        if result.status == "quarantined":
            pytest.xfail(mask(f"quarantined ({result.quarantine}): {failure_reason(result)}"))
        run = load_run(outcome.run_dir)
        lines = [f"tamesu: {result.id} {result.status}", failure_text(result, run)]
        for summary in result.runs:
            # as JUnit's <system-out> says it: a turn the timeout cut short shows "(no answer: why)"
            said = transcript_lines(run, summary) if summary.status != "passed" else []
            if said:
                lines.append(f"transcript of run {summary.run}:")
                lines.extend(f"  {line}" for line in said)
        raise TamesuFailure(mask("\n".join(lines)))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, TamesuFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        line, _ = self.planned.suite.doc.position(("tests", self.planned.index))
        return self.path, line - 1, f"tamesu: {self.planned.id}"


class _Quiet:
    """pytest prints the outcome; tamesu's console stays silent inside it, its warnings become pytest's."""

    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None:
        pass

    def run_started(self, test: PlannedTest, number: int, total: int) -> None:
        pass

    def run_finished(self, test: PlannedTest, result: RunResult) -> None:
        pass

    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None:
        pass

    def warning(self, message: str) -> None:
        warnings.warn(f"tamesu: {message}", UserWarning, stacklevel=1)

    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None:
        pass
