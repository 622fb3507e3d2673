"""The console of `tamesu test` (a report of JSONL test cases): the design's header, one block per test case
as it finishes, a summary.

Standard cases print one line and their counts (the later revision); multi-turn and dynamic cases print a
tree of turns with the agent's answer and each assertion, `[Initial]` / `[Simulated]` / `[Human]` markers,
SKIPPED with the question the agent asked (the earlier revision), and dynamic cases their checkpoints.
Everything is printed from the CaseRecord that goes to the JSONL output. `-v` shows whole answers and the
awaiting-input verdict of every turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from tamesu.matching import quoted
from tamesu.report.case_records import AssertionRecord, CaseRecord, TurnRecord
from tamesu.report.console import writes_plain
from tamesu.suite.secrets import Redactor

MISSING_HINT = "Add more turns, use --interactive, or configure a simulator"

HEAVY = "═" * 63
LIGHT = "─" * 63
_STYLE = {"PASSED": "green", "FAILED": "red", "SKIPPED": "yellow", "ERROR": "magenta", "ENDED": "cyan"}
_MARK = {"passed": ("✓", "green"), "failed": ("✗", "red"), "error": ("!", "magenta"), "skipped": ("○", "yellow"),
         "inconclusive": ("?", "yellow"), "quarantined": ("~", "yellow")}
_SOURCE = {"simulator": "[Simulated] ", "human": "[Human] "}
_PIPE = "  │          "


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f}s"


def _call(call: Any) -> str:
    return f"{call.name}({json.dumps(call.args, ensure_ascii=False, sort_keys=True)})"


class TestConsole:
    """Prints to a rich Console; secrets are masked in every line."""

    __test__ = False

    def __init__(self, console: Console, redactor: Redactor, verbose: int = 0) -> None:
        self.console = console
        self.redactor = redactor
        self.verbose = verbose
        self._limit = None if verbose else 100
        self._plain: bool | None = None
        """Whether lines are written as plain text (`writes_plain`), known at the first line."""

    def _line(self, *parts: str | tuple[str, str]) -> None:
        plain = self.redactor.text("".join(part if isinstance(part, str) else part[0] for part in parts))
        if self._plain is None:
            self._plain = writes_plain(self.console)
        if self._plain and plain.isprintable():
            # what rich writes for it, without rich's 0.2 ms (a run of three cases prints some 70 lines);
            # flushed as rich flushes, so the order with stderr stays
            file = self.console.file
            file.write(plain + "\n")
            file.flush()
            return
        text = Text.assemble(*parts)
        self.console.print(Text(plain, spans=text.spans), soft_wrap=True)

    # -- the frame --------------------------------------------------------------------------------------

    def start(self, agent: str, source: str, count: int, modes: set[str]) -> None:
        title = "Agent Test (Multi-Turn)" if "multi_turn" in modes else \
            "Agent Test (Dynamic)" if "dynamic" in modes else "Agent Test"
        self._line(HEAVY)
        self._line(("  " + title, "bold"))
        self._line(HEAVY)
        self._line(("ℹ ", "cyan"), f"Agent: {agent}")
        self._line(("ℹ ", "cyan"), f"Input: {source} ({count} test case{'s' if count != 1 else ''})")
        self._line("")
        self._section("Running Tests")
        self._line("")

    def _section(self, title: str) -> None:
        self._line(LIGHT)
        self._line(("  " + title, "bold"))
        self._line(LIGHT)

    def warning(self, message: str) -> None:
        self._line(("warning: ", "yellow"), message)

    def finish(self, records: list[CaseRecord], seconds: float, run_dir: Path, output: Path | None,
               stopped: str | None, along_the_way: str = "") -> None:
        counts = {status: sum(1 for r in records if r.status == status)
                  for status in ("passed", "failed", "skipped", "error")}
        multi_turn = any(r.mode != "standard" for r in records)
        self._section("Summary")
        self._line(f"  Total:   {len(records)} test{'s' if len(records) != 1 else ''}")
        self._line("  Passed:  ", (str(counts["passed"]), "green"))
        self._line("  Failed:  ", (str(counts["failed"]), "red" if counts["failed"] else ""))
        if multi_turn or counts["skipped"]:
            self._line("  Skipped: ", (str(counts["skipped"]), "yellow" if counts["skipped"] else ""))
        if counts["error"]:
            self._line("  Errors:  ", (str(counts["error"]), "magenta"))
        if multi_turn:
            turns = sum(r.total_turns or (1 if r.response is not None else 0) for r in records)
            ran = [r for r in records if r.total_turns or r.response is not None]
            self._line("")
            self._line(f"  Total turns: {turns}")
            self._line(f"  Avg turns/test: {turns / len(ran):.1f}" if ran else "  Avg turns/test: 0")
            self._line(f"  Total time: {seconds:.1f}s")
        else:
            self._line(f"  Time:    {seconds:.1f}s")
        if stopped:
            self._line(("  Stopped early: ", "yellow"), stopped)
        if along_the_way:
            self._line((f"  {along_the_way}", "yellow"))
        self._line("")
        self._line(("ℹ ", "cyan"), f"Results: {run_dir}")
        if output is not None:
            self._line(("ℹ ", "cyan"), f"Output: {output}")

    # -- one case ---------------------------------------------------------------------------------------

    def case_finished(self, record: CaseRecord) -> None:
        if record.mode == "standard" or (not record.turns and record.status in ("skipped", "error")):
            self._standard(record)
        else:
            self._tree(record)
        if record.stats is not None:
            # repeated: the mark is the verdict over every run, the lines above are one run's
            stats = record.stats
            unsaid = "".join(f", {n} {what}" for n, what in ((record.inconclusive_runs, "inconclusive"),
                                                               (record.error_runs, "errored")) if n)
            self._line(f"  Runs: {stats.passes}/{stats.runs} passed{unsaid} (run {record.shown_run or 1} shown) · "
                       + " · ".join(part for part in (stats.line(), stats.ks()) if part))
            if record.reason and record.status != "passed":
                self._line("  Verdict: ", (record.reason, _MARK[record.status][1]))
        self._line("")

    def _standard(self, record: CaseRecord) -> None:
        mark, style = _MARK[record.status]
        self._line((mark, style), f" [{_shown_id(record)}]{_named(record)} ({_seconds(record.duration_ms)})")
        if record.status == "skipped":
            self._line("  ", ("SKIPPED", "yellow"), f": {record.skip_reason or record.error or 'not run'}")
            return
        if record.error:
            self._line("  Error: ", (record.error, _MARK[record.status][1]))
        verdicts = record.assertions or []
        passed = sum(1 for v in verdicts if v.passed)
        graded = sum(1 for v in verdicts if v.passed is not None)
        counted = f"{passed}/{len(verdicts)} passed" if graded or not verdicts else "not graded"
        if record.messages_count is not None:
            self._line(f"  Messages: {record.messages_count}, Assertions: {counted}")
        if record.status != "passed" or self.verbose:
            calls = [f"[tool: {_call(call)}]" for call in record.tool_calls or []]
            if record.response or (record.response is not None and not calls):
                self._line("  Agent: ", quoted(record.response, self._limit))
            elif calls:  # the agent only called a tool
                calls[0] = f"Agent: {calls[0]}"
            for call in calls:
                self._line(f"  {call}")
            for verdict in verdicts:
                if verdict.passed is False or self.verbose:
                    self._verdict("  ", verdict)

    def _tree(self, record: CaseRecord) -> None:
        turns = record.turns or []
        about = f"simulator: {record.simulator}" if _simulator_led(record) else \
            f"{len(turns)} turn{'s' if len(turns) != 1 else ''}"
        self._line(("► ", "bold"), f"[{_shown_id(record)}]{_named(record)} ({about})")
        for turn in turns:
            self._turn(record, turn)
        if record.missing_input is not None:
            self._missing(record)
        if record.checkpoints:
            self._checkpoints(record)
        self._end(record)

    def _turn(self, record: CaseRecord, turn: TurnRecord) -> None:
        marker = _SOURCE.get(turn.input_source, "")
        if turn.turn == 1 and _simulator_led(record) and turn.input_source == "static":
            marker = "[Initial] "
        status = "FAILED" if turn.status == "failed" else "PASSED"
        self._line(f"  ├─ Turn {turn.turn}: {marker}{quoted(turn.input, self._limit)} → ",
                   (status, _STYLE[status]), f" ({_seconds(turn.duration_ms)})")
        calls = [f"[tool: {_call(call)}]" for call in turn.tool_calls or []]
        if turn.output or not calls:
            self._line(_PIPE, "Agent: ", quoted(turn.output, self._limit))
        else:  # a turn that only called a tool: the call is what the agent did, as the design's console has it
            calls[0] = f"Agent: {calls[0]}"
        for call in calls:
            self._line(_PIPE, call)
        if self.verbose and turn.awaiting_input is not None:
            waits = "yes" if turn.awaiting_input else "no"
            self._line(_PIPE, (f"Awaiting input: {waits} ({turn.awaiting_reason})", "dim"))
        if turn.error:
            self._line(_PIPE, ("Error: ", "red"), turn.error)
        for verdict in turn.assertions or []:
            self._verdict(_PIPE, verdict)
        if record.goal_achieved and turn.turn == len(record.turns or []):
            self._line(_PIPE, f"Goal achieved: {record.goal_achieved}")
        elif record.end_reason == "simulator_stopped" and turn.turn == len(record.turns or []):
            # the conversation ended here, the agent perhaps still asking: said, as a goal reached is
            self._line(_PIPE, ("Simulator stopped: no next message, its goal not reached", "yellow"))
        self._line("  │")

    def _missing(self, record: CaseRecord) -> None:
        missing = record.missing_input
        assert missing is not None
        word = {"skip": "SKIPPED", "fail": "FAILED", "end": "ENDED"}[missing.policy]
        self._line(f"  ├─ Turn {missing.after_turn + 1}: ", (word, _STYLE[word]))
        nobody = f", nobody answered ({missing.person})" if missing.person else ""
        self._line(_PIPE, f"Reason: Agent awaiting input, no next turn defined{nobody} (on_missing_input: "
                          f"{missing.policy})")
        asked = quoted(missing.question, self._limit)
        self._line(_PIPE, f"Agent asked: {asked}" + (f" (input hint: {missing.hint})" if missing.hint else ""))
        # a person was asked already: --interactive is no way out
        self._line(_PIPE, f"Hint: {MISSING_HINT if not missing.person else 'Add more turns or configure a simulator'}")
        self._line("  │")

    def _checkpoints(self, record: CaseRecord) -> None:
        points = record.checkpoints or []
        reached = sum(1 for c in points if c.reached_at_turn is not None)
        self._line(f"  ├─ Checkpoints: {reached}/{len(points)} reached")
        for point in points:
            mark, style = ("✓", "green") if point.passed else ("✗", "red") if point.passed is False else ("·", "")
            where = f" (turn {point.reached_at_turn})" if point.reached_at_turn is not None else ""
            about = f" {point.description}" if point.description else ""
            # `greet (turn 2): found ...`, the turn said once (the reason begins "reached at turn 2: ")
            said = point.reason.removeprefix(f"reached at turn {point.reached_at_turn}: ")
            detail = f": {said}" if not point.passed or self.verbose else ""
            optional = " [optional]" if not point.required else ""
            self._line("  │  ", (mark, style), f" {point.id}{where}{optional}{about}{detail}")
        self._line("  │")

    def _end(self, record: CaseRecord) -> None:
        status = record.status.upper() if record.status != "error" else "ERROR"
        finals = record.final_assertions or []
        graded = [v for v in finals if v.passed is not None]
        if graded:
            group = "FAILED" if any(v.passed is False for v in graded) else "PASSED"
            shown_elsewhere = record.error is None or record.missing_input is not None
            last = shown_elsewhere and (group == status or status == "FAILED")
            self._line(f"  {'└' if last else '├'}─ Final Assertions: ", (group, _STYLE[group]))
            prefix = "     " if last else "  │  "
            for verdict in graded:
                self._verdict(prefix, verdict)
            if last:
                return
        self._line("  └─ Result: ", (status, _STYLE.get(status, "")))
        if record.error:
            self._line("     ", ("Error: " if record.status == "error" else "Reason: ", "bold"), record.error)
        elif record.skip_reason and record.status == "skipped" and record.missing_input is None:
            self._line(f"     Reason: {record.skip_reason}")
        elif record.status == "inconclusive" and record.fault_reason:
            self._line("     ", ("Reason: ", "bold"), record.fault_reason)

    def _verdict(self, prefix: str, verdict: AssertionRecord) -> None:
        if verdict.passed is None:
            self._line(prefix, ("· ", "dim"), f"{verdict.label}: {verdict.reason}")
            return
        mark, style = ("✓", "green") if verdict.passed else ("✗", "red")
        reason = f": {verdict.reason}" if not verdict.passed or self.verbose else ""
        self._line(prefix, (mark, style), f" {verdict.label}{reason}")


def _simulator_led(record: CaseRecord) -> bool:
    """Whether the case is headed by its simulator (the design's T003: one `[Initial]` input, then simulated
    ones) rather than by its turns (its T001: written turns, headed `(3 turns)`, even with a simulator to fall
    back on)."""
    written = sum(1 for turn in record.turns or [] if turn.input_source == "static")
    return record.simulator is not None and written <= 1


def _named(record: CaseRecord) -> str:
    # a case without a name is its id alone: `[T001] T001` said the id twice
    return f" {record.name}" if record.name else ""


def _shown_id(record: CaseRecord) -> str:
    """The case id, after its file's name when the cases come from a folder (an id is unique per file)."""
    return f"{record.file}: {record.id}" if record.file else record.id
