"""The console: a live line per running test, then PASS / FAIL / QUAR / SKIP / ERR with reasons, then a summary."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from tamesu.report.along_the_way import AlongTheWay
from tamesu.report.load import shown_path
from tamesu.report.words import count_of, echoed_failure, not_evaluated, visible
from tamesu.results.load import LoadReport, table_lines
from tamesu.results.records import RunResult, RunSummaryFile, TestResult
from tamesu.suite.secrets import Redactor

if TYPE_CHECKING:  # the engine's types, named for the reporter protocol only
    from tamesu.plan import Plan, PlannedTest

_BADGES = {
    "passed": ("PASS", "bold green"),
    "failed": ("FAIL", "bold red"),
    "error": ("ERR ", "bold magenta"),
    "quarantined": ("QUAR", "bold yellow"),
    "skipped": ("SKIP", "dim"),
    "inconclusive": ("INC ", "bold yellow"),
}
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def make_console(color: str, stderr: bool = False) -> Console:
    """`auto` follows the terminal and NO_COLOR; `always` and `never` force it. The live lines are drawn only
    on a terminal someone watches (`animates`), never because colour was forced."""
    # soft wrap: a reason line is never cut at 80 columns in a CI log; the terminal wraps it if it must
    interactive = animates(sys.stderr if stderr else sys.stdout)
    if color == "always":
        return Console(force_terminal=True, no_color=False, stderr=stderr, highlight=False, soft_wrap=True,
                       force_interactive=interactive)
    if color == "never":
        return Console(no_color=True, stderr=stderr, highlight=False, force_terminal=False, soft_wrap=True,
                       force_interactive=interactive)
    return Console(stderr=stderr, highlight=False, soft_wrap=True, force_interactive=interactive)


def animates(stream: TextIO) -> bool:
    """Whether a live region may redraw itself on `stream`: a terminal (not `TERM=dumb`), unless
    `TTY_INTERACTIVE=0` says no one watches it (`=1` says someone does). `--color always` and `FORCE_COLOR`
    make a CI log coloured, not a terminal: redrawn 8 times a second, each frame would stay in it as lines."""
    said = os.environ.get("TTY_INTERACTIVE")
    if said in ("0", "1"):
        return said == "1"
    if os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False


def writes_plain(console: Console) -> bool:
    """Whether `console` writes a one-line Text as its plain text: to a pipe or a file, without colour, never
    cut (soft wrap), nothing recorded. rich costs 0.1-0.2 ms a line doing it; its callers write such a line
    themselves."""
    return not console.is_terminal and console.color_system is None and not console.record and console.soft_wrap \
        and not console.quiet


class ConsoleReporter:
    def __init__(self, console: Console, redactor: Redactor, verbose: int = 0) -> None:
        self.console = console
        self.redactor = redactor
        self.verbose = verbose
        self._running: dict[tuple[str, int], tuple[str, float]] = {}
        self._live: Live | None = None
        self._started = time.monotonic()
        self._planned = 0
        self._done = 0
        self._along_the_way = AlongTheWay()
        """Tests planned and finished: the live line shows done/total."""

    # ------------------------------------------------------------ lifecycle

    def start(self, plan: Plan, tests: list[PlannedTest], run_dir: Path) -> None:
        suites = len({t.suite.name for t in tests})
        self._planned, self._done = len(tests), 0
        self._print(Text.assemble(("tamesu ", "bold"),
                                  f"running {count_of(len(tests), 'test')} from {count_of(suites, 'suite')}"))
        if self.console.is_interactive:
            self._live = Live(self._render_running(), console=self.console, refresh_per_second=8,
                              transient=True, get_renderable=self._render_running)
            self._live.start()

    def run_started(self, test: PlannedTest, number: int, total: int) -> None:
        label = test.id if total == 1 else f"{test.id} (run {number}/{total})"
        self._running[(test.id, number)] = (label, time.monotonic())
        if self._live is not None:
            self._live.refresh()  # the live region is redrawn from its last refresh when a line is printed
        elif self.verbose:
            self._print(Text(f"  RUN  {label}", style="dim"))

    def run_finished(self, test: PlannedTest, result: RunResult) -> None:
        self._running.pop((test.id, result.run), None)
        if self._live is not None:
            self._live.refresh()
        if self.verbose >= 2 or (self.verbose and result.status != "passed"):
            self._print_transcript(result)

    def test_finished(self, result: TestResult, runs: list[RunResult]) -> None:
        self._done += 1
        self._along_the_way.add(runs)
        badge, style = _BADGES[result.status]
        line = Text.assemble((badge, style), "  ", result.id)
        if result.total_runs > 1:
            line.append(f"  {result.runs_said()}", style="dim")
        if result.duration_ms:
            line.append(f"  {result.duration_ms / 1000:.2f}s", style="dim")
        self._print(line)
        if result.stats is not None:
            self._print(Text(f"      {stats_line(result)}", style="dim"))
        # an inconclusive run's finding is said on its own `?` line below: not twice
        echoed = result.status == "inconclusive" and any(
            run.status == "inconclusive" and run.fault_reason == result.reason for run in result.runs)
        reason = _past_the_stats(result)
        if reason and not echoed:
            self._print(Text(f"      {reason}", style="yellow" if result.status == "inconclusive" else "red"))
        if result.status == "skipped" and result.skip_reason:
            self._print(Text(f"      {result.skip_reason}", style="dim"))
        if result.status == "quarantined" and result.quarantine:
            self._print(Text(f"      quarantined: {result.quarantine}", style="yellow"))
        if result.status in ("failed", "error", "quarantined", "inconclusive") or any(
                run.status in ("failed", "error", "inconclusive") for run in result.runs):
            # a passing test's runs that did not pass still happened: a flaky one says which failed, on what
            # check and whose fault, as errored ones say what broke them
            self._print_problems(result)

    def warning(self, message: str) -> None:
        self._print(Text(f"warning: {message}", style="yellow"))

    def load_finished(self, report: LoadReport) -> None:
        for line in table_lines(report):
            self._print(Text(line, style="bold" if line.startswith("load:") else ""))

    def close(self) -> None:
        """The live lines erased and the terminal's cursor shown again: at the run's end, and when it is
        interrupted (Ctrl-C left the cursor hidden and the last frame after the interrupted note)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def finish(self, summary: RunSummaryFile, run_dir: Path) -> None:
        self.close()
        c = summary.counts
        parts = [f"{c['passed']} passed", f"{c['failed']} failed"]
        if c["quarantined"]:
            parts.append(f"{c['quarantined']} quarantined")
        if c["error"]:
            parts.append(count_of(c["error"], "error"))
        if c["skipped"]:
            parts.append(f"{c['skipped']} skipped")
        if c.get("inconclusive"):
            parts.append(f"{c['inconclusive']} inconclusive (the simulated user at fault)")
        style = "bold red" if c["failed"] or c["error"] or c.get("inconclusive") else "bold green"
        self._print(Text(""))
        self._print(Text.assemble((", ".join(parts), style), f" in {summary.duration_ms / 1000:.2f}s"))
        if summary.models:
            self._print(Text(summary.models.said(), style="dim"))
        if summary.stopped:
            self._print(Text(f"stopped early: {summary.stopped}", style="bold yellow"))
        if noted := self._along_the_way.line():
            self._print(Text(noted, style="yellow"))
        self._print(Text(f"results: {shown_path(run_dir)}", style="dim"))  # as the report lines after it

    # ------------------------------------------------------------ helpers

    def _print(self, renderable: Any) -> None:
        if isinstance(renderable, Text):
            plain = self.redactor.text(renderable.plain)
            if self._writes_plain() and plain.isprintable():
                # to a pipe or a file without colour, rich writes a one-line Text as its plain text (soft
                # wrap: never cut) and costs 0.1-0.2 ms a line doing it; a test's line is written as is
                self.console.file.write(plain + "\n")
                return
            shown = visible(plain)
            # a test named, or an agent answering, with terminal escapes (colours, a cleared screen, a bell, a
            # right-to-left override) is shown them written out, never acted on by the terminal
            renderable = Text(shown, style=renderable.style, spans=renderable.spans if shown == plain else [])
        self.console.print(renderable)

    def _writes_plain(self) -> bool:
        return self._live is None and writes_plain(self.console)

    def _render_running(self) -> Group:
        now = time.monotonic()
        frame = _SPINNER[int(now * 8) % len(_SPINNER)]
        lines = [Text(f"  {frame} {label}  {now - since:.1f}s", style="cyan")
                 for label, since in sorted(self._running.values(), key=lambda v: v[1])]
        if self._planned:
            lines.append(Text(f"  {self._done}/{self._planned} done", style="dim"))
        return Group(*lines)

    def _print_problems(self, result: TestResult) -> None:
        faults: dict[str, list[int]] = {}
        for run in result.runs:
            prefix = f"run {run.run}: " if result.total_runs > 1 else ""
            if run.fault is not None:
                faults.setdefault(run.fault, []).append(run.run)
            if run.status == "inconclusive":
                # a run the simulated user spoiled is not the agent's failure: only the finding is shown
                # made again: a model's user with a new seed, an agent's as it is (its answers may differ)
                again = f" (made {count_of(run.reruns + 1, 'time')})" if run.reruns else ""
                self._print(Text(f"      ? {prefix}{run.fault_reason}{again}", style="yellow"))
            else:
                if run.error:
                    self._print(Text(f"      ! {prefix}{run.error}", style="magenta"))
                echoed = echoed_failure(run.error, run.failures)
                for failure in run.failures:
                    if failure is echoed:
                        continue  # the check the run's error came from: its line above says it
                    where = f" (turn {failure.on_turn})" if failure.on_turn is not None else ""
                    self._print(Text(f"      ✗ {prefix}{failure.name}{where}: {failure.reason}", style="red"))
                if run.not_evaluated:
                    unevaluated = not_evaluated(run.not_evaluated, bool(run.error), run.status == "skipped")
                    self._print(Text(f"      - {prefix}{unevaluated}", style="dim"))
            if run.dir and (run.error or run.failures or run.status == "inconclusive"):
                self._print(Text(f"        {run.dir}", style="dim"))
        if faults:
            several = result.total_runs > 1
            said = [fault + (f" (run{'s' if len(runs) > 1 else ''} {', '.join(map(str, runs))})" if several else "")
                    for fault, runs in faults.items()]
            self._print(Text(f"      fault: {'; '.join(said)}",
                             style="yellow" if "simulated_user" in faults else "dim"))

    def _print_transcript(self, result: RunResult) -> None:
        # a heading with nothing under it read as output lost: say that no turn came back
        none = "" if result.turns else " no turn was answered"
        self._print(Text(f"    transcript of {result.test}, run {result.run}:{none}", style="dim"))
        for turn in result.turns:
            if turn.user is not None:
                self.console.print(f"      [bold]user[/]  {self._said(turn.user.display())}")
            if turn.cut is not None:  # the timeout ran out while the agent answered: there is no answer to show
                self.console.print(f"      [bold]agent[/] [dim](no answer: {escape(turn.cut)})[/]")
                continue
            self.console.print(f"      [bold]agent[/] {self._said(turn.agent.text)}")

    def _said(self, text: str) -> str:
        # a turn's later lines (its files, a reply of several lines) under its first, not at the margin
        shown = visible(self.redactor.text(text))
        cut = ""
        if len(shown) > TRANSCRIPT_CHARS:
            # a megabyte answer printed whole buried the run's verdicts
            cut = f" … (cut: {TRANSCRIPT_CHARS} of {len(shown)} characters shown; transcript.json has it whole)"
            shown = shown[:TRANSCRIPT_CHARS]
        return escape(shown).replace("\n", "\n" + " " * 12) + (f"[dim]{escape(cut)}[/]" if cut else "")


TRANSCRIPT_CHARS = 4000
"""How much of one turn's words `-vv` prints."""


_RUNS_BELOW = re.compile(r"\d+ of \d+ runs passed, rate [\d.]+ below pass_threshold [^;\s]+(?:; |$)")


def _past_the_stats(result: TestResult) -> str | None:
    """A test's reason as said beneath its line and its statistics: `0 of 3 runs passed, rate 0.00 below
    pass_threshold 0.6` (engine.repeats) is what `0/3 runs passed` and `rate 0.00 ... (threshold 0.6)` above it
    said already; only what follows it (runs that said nothing) is left. Reports without those lines keep it."""
    if result.reason is None or result.stats is None:
        return result.reason
    said = _RUNS_BELOW.match(result.reason)
    return result.reason if said is None else result.reason[said.end():] or None


def stats_line(result: TestResult) -> str:
    """`rate 0.77 [0.59, 0.88] · pass^1 0.77 pass^30 0.00 · undecided at 95% · 12 of 30 runs (18 saved)`."""
    stats = result.stats
    if stats is None:
        return ""
    decided = {"pass": "decided: passes", "fail": "decided: fails", None: "undecided"}[stats.decided]
    parts = [stats.line(), stats.ks(), f"{decided} at {stats.confidence:.0%} (threshold {stats.threshold:g})"]
    if stats.adaptive is not None:
        a = stats.adaptive
        parts.append(f"adaptive: {result.total_runs} of {a.max_runs} runs ({a.runs_saved} saved)")
    return " · ".join(p for p in parts if p)
