"""A Markdown summary of a run: the GitHub job summary (`$GITHUB_STEP_SUMMARY`) and `--report markdown:PATH`.

Short on purpose: a job summary is read at a glance and GitHub caps its size, so it lists what needs attention
(failures, errors, quarantined tests, the baseline's regressions) and leaves the rest to the HTML report.
"""

from __future__ import annotations

import re
from pathlib import Path

from tamesu.matching import one_line
from tamesu.plugins import register
from tamesu.report import along_the_way
from tamesu.report.baseline import Comparison, describe_change
from tamesu.report.load import LoadedRun
from tamesu.report.words import count_of, failure_reason, not_evaluated
from tamesu.results.records import TestResult

_ICONS = {"passed": "✅", "failed": "❌", "error": "💥", "quarantined": "🟡", "skipped": "⏭️", "inconclusive": "❔"}
LIMIT = 50
"""Rows per list; the rest is counted, not shown."""
WHY = 2000
"""Characters of a reason a row shows: the whole one line the other reports show, but for a line few checks write
(a pack whose many parts failed, a plug-in's own verdict): GitHub refuses a job summary over 1 MiB, 50 rows of it."""


# What GitHub would read as markup in an agent's words: HTML, links and images, emphasis (`_` only at a word's edge:
# within a word it is none), strikethrough, code, a table's cell border
_MARKUP = re.compile(r"[\\`*\[\]~|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _cell(text: str, limit: int = 300) -> str:
    """Text as it was written, never markup: `<b>` in an answer is shown, not made bold."""
    return _MARKUP.sub(lambda m: "\\" + m.group(0), one_line(text, limit).translate(_HTML))


def _code(text: str, limit: int = 300) -> str:
    """A code span that holds any text: its fence longer than the backticks inside, `|` escaped for the table."""
    flat = one_line(text, limit)
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    inside = flat.replace("|", "\\|")
    return f"{fence}{pad}{inside}{pad}{fence}"


def headline(run: LoadedRun) -> str:
    c = run.summary.counts
    parts = [f"{c.get('passed', 0)} passed", f"{c.get('failed', 0)} failed"]
    if c.get("error"):
        parts.append(count_of(c["error"], "error"))
    for key in ("quarantined", "skipped", "inconclusive"):
        if c.get(key):
            parts.append(f"{c[key]} {key}")
    return ", ".join(parts)


def _reason(text: str) -> str:
    """A reason as a cell: whole, escaped and on one line; one longer than `WHY` cut, saying so."""
    length = len(one_line(text))
    cut = f" (cut at {WHY} of {length} characters: report.json has the whole line)" if length > WHY else ""
    return _cell(text, WHY) + cut


def _why(result: TestResult) -> str:
    """The failure, then the count of checks its root cause kept from grading, as the console and JUnit say it."""
    said = _reason(failure_reason(result))
    counted = next((run for run in result.runs if run.not_evaluated), None)
    if counted is not None:
        said += "<br>" + not_evaluated(counted.not_evaluated, bool(counted.error), counted.status == "skipped")
    return said


def _table(rows: list[TestResult]) -> list[str]:
    lines = ["| test | runs | why |", "| --- | --- | --- |"]
    for result in rows[:LIMIT]:
        cells = [_code(result.id), result.runs_said().replace(" runs passed", ""), _why(result)]
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > LIMIT:
        lines.append(f"| … and {len(rows) - LIMIT} more | | |")
    return lines


def _stats_table(rows: list[TestResult]) -> list[str]:
    lines = ["| test | status | runs | pass rate [95% interval] | pass^k | verdict |",
             "| --- | --- | --- | --- | --- | --- |"]
    for result in rows[:LIMIT]:
        stats = result.stats
        assert stats is not None
        decided = {"pass": "decided: passes", "fail": "decided: fails", None: "undecided"}[stats.decided]
        runs = f"{result.total_runs}"
        if stats.adaptive is not None:
            runs += f" of {stats.adaptive.max_runs} ({stats.adaptive.runs_saved} saved)"
        cells = [_code(result.id), result.status, runs, stats.line(), stats.ks(),
                 f"{decided} (threshold {stats.threshold:g})"]
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > LIMIT:
        lines.append(f"| … and {len(rows) - LIMIT} more | | | | | |")
    return lines


def render_markdown(run: LoadedRun, comparison: Comparison | None = None) -> str:
    s = run.summary
    bad = s.counts.get("failed", 0) or s.counts.get("error", 0) or s.counts.get("inconclusive", 0)
    # an interrupted run (130, 143), a budget (4) or a broken run folder (3) is no green run, whatever finished
    icon = "❌" if bad else "⚠️" if s.exit_code != 0 else "✅"
    lines = [f"### {icon} tamesu: {headline(run)}", "",
             f"{count_of(s.counts.get('total', len(run.results)), 'test')} in {s.duration_ms / 1000:.2f} s · exit code "
             f"{s.exit_code} · run `{run.name}`"]
    if run.plan and run.plan.shards:
        lines[-1] += f" · shards {', '.join(run.plan.shards)}"
    for note in (s.interrupted, s.stopped):
        if note:
            lines += ["", f"> ⚠️ {_cell(note, 1000)}"]
    if noted := along_the_way.of_run(run):
        lines += ["", f"> ℹ️ {_cell(noted, 1000)}"]
    groups = [("failed", "Failed", None), ("error", "Errors (infrastructure)", False),
              ("error", "Errors of the suite (what it asks cannot be done)", True),
              ("inconclusive", "Inconclusive (the simulated user at fault, not the agent)", None),
              ("quarantined", "Quarantined (not failing the run)", None)]
    for status, title, suites in groups:
        rows = [r for r in run.results if r.status == status and suites in (None, r.suites_error)]
        if rows:
            lines += ["", f"#### {_ICONS[status]} {title}", "", *_table(rows)]
    repeated = [r for r in run.results if r.stats is not None]
    if repeated:
        lines += ["", "#### Repeated tests", "", *_stats_table(repeated)]
    if comparison is not None:
        lines += ["", f"#### Compared with `{comparison.baseline}`: {comparison.headline()}", ""]
        for change in comparison.regressions[:LIMIT]:
            lines.append(f"- ❌ regression {_code(change.id)}: was {change.before}, now {change.now}: "
                         f"{_reason(change.reason)}")
        for change in comparison.fixes[:LIMIT]:
            lines.append(f"- ✅ fixed {_code(change.id)} (was {change.before})")
        for change in comparison.quarantined[:LIMIT]:
            lines.append(f"- 🟡 quarantined {_code(change.id)} (was {change.before}; not a regression)")
        for change in comparison.skipped[:LIMIT]:
            lines.append(f"- ⏭️ skipped now {_code(change.id)} (was {change.before}): {_reason(change.reason)}")
        lines.extend(f"- 🆕 new {_code(i)}" for i in comparison.new[:LIMIT])
        lines.extend(f"- ➖ removed {_code(i)}" for i in comparison.removed[:LIMIT])
        lines.extend(f"- {'📉' if m.change is not None and m.change < 0 else '📈'} {_code(m.id)} "
                     f"{describe_change(m)}" for m in comparison.metric_changes[:LIMIT])
        cut = sum(max(0, len(group) - LIMIT) for group in (comparison.regressions, comparison.fixes,
                                                           comparison.quarantined, comparison.skipped, comparison.new,
                                                           comparison.removed, comparison.metric_changes))
        if cut:
            lines.append(f"- ... and {cut} more (all of them in baseline.json)")
    missing = run.not_finished()
    if missing:
        lines += ["", f"#### Not finished ({len(missing)})", ""]
        lines.extend(f"- {_code(entry.id)}" for entry in missing[:LIMIT])
    return "\n".join(lines) + "\n"


@register("reports", "markdown", default_file="summary.md")
def write_markdown(run: LoadedRun, path: Path | None, comparison: Comparison | None = None) -> None:
    """The `markdown` entry of `report.formats`."""
    assert path is not None
    path.write_text(render_markdown(run, comparison), encoding="utf-8")
