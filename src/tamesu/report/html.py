"""The HTML report: one self-contained file (inline CSS, inline script, inline SVG) that needs no network.

Everything is rendered on the server side (here the page, each test and run; a run's turns, metrics and events
in `_html_turns`), so the page reads and prints without its script; the script only adds filters, a search box
and opening every test before printing. A Content-Security-Policy forbids any fetch, so even text an agent wrote
cannot make the page load something. Artifacts are linked by relative path from the report's own folder. The
agent's words are escaped, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from importlib import resources
from pathlib import Path
from string import Template
from urllib.parse import quote

from tamesu import __version__
from tamesu.matching import one_line
from tamesu.plugins import register
from tamesu.report import _html_turns, _svg, along_the_way
from tamesu.report._artifacts import other_files
from tamesu.report._html_text import esc, ms, num, short
from tamesu.report.baseline import Comparison, describe_change
from tamesu.report.load import LoadedRun, mean_metrics
from tamesu.report.load_html import load_sections
from tamesu.report.waterfall import waterfall_css
from tamesu.report.words import evidence_to_show, failure_reason, fault_said_below, not_evaluated
from tamesu.results.records import AssertionResult, RunResult, RunSummary, TestResult

_BADGES = {"passed": "PASS", "failed": "FAIL", "error": "ERR", "quarantined": "QUAR", "skipped": "SKIP",
           "inconclusive": "INC"}
_ORDER = {"failed": 0, "error": 1, "inconclusive": 2, "quarantined": 3, "passed": 4, "skipped": 5}
_NOT_PASSED = ("failed", "error", "quarantined", "inconclusive")


_WHY = 160
"""Characters of a failure's line the summary row shows: about two lines of the page."""


def _why(line: str) -> str:
    """The summary row's failure line: cut at a word's end with `…`, the whole line its tooltip (the body below
    has it too). It was cut at 160 characters mid-word, with nothing to read the rest where it was cut."""
    shown = one_line(line, _WHY)
    whole = f' title="{esc(line)}"' if shown != line else ""
    return f'<span class="why"{whole}>{esc(shown)}</span>'


def _asset(name: str) -> str:
    return resources.files("tamesu.report").joinpath("html_assets").joinpath(name).read_text(encoding="utf-8")


class _Page:
    """Renders one run; `base` is the report's folder, from which artifact links are made relative."""

    def __init__(self, run: LoadedRun, base: Path, comparison: Comparison | None) -> None:
        self.run = run
        self.base = base
        self.comparison = comparison
        seen = Counter(_readable(result.id) for result in run.results)
        self._shared = {readable for readable, n in seen.items() if n > 1}
        self._resolved_base = base.resolve()
        self._resolved_run = run.dir.resolve()
        self._run_prefix = str(run.dir) + os.sep
        run_from_base = Path(os.path.relpath(self._resolved_run, self._resolved_base)).as_posix()
        self._run_from_base = "" if run_from_base == "." else run_from_base + "/"
        self._file_names: dict[str, str] = {}

    def relative(self, path: Path) -> str:
        """`path` from the report's folder. The run folder is resolved once and what lies in it is joined to
        that (tamesu makes its folders, never symlinks): resolving every link's path anew, a few per run, made
        lstat calls a third of the report's time. A path below the run folder is joined as text (pathlib's
        parsing, three links a test, was a fifth of the page's time); the same answer as the path way below."""
        below = self._below(path)
        if below is not None:
            return below
        try:
            inside = path.relative_to(self.run.dir)
        except ValueError:
            inside = None
        resolved = self._resolved_run / inside if inside is not None and ".." not in inside.parts else path.resolve()
        return Path(os.path.relpath(resolved, self._resolved_base)).as_posix()

    def _below(self, path: Path) -> str | None:
        """`relative(path)` for a path below the run folder, made from the text alone; None for another path."""
        text = str(path)
        if text.startswith(self._run_prefix):
            below = text[len(self._run_prefix):].replace(os.sep, "/")
            if ".." not in below.split("/"):
                return self._run_from_base + below
        return None

    def link(self, path: Path, text: str) -> str:
        return f'<a href="{esc(quote(self.relative(path)))}">{esc(text)}</a>'

    # -------------------------------------------------------------- the page

    def render(self) -> str:
        run = self.run
        parts = [self.header(), self.summary()]
        if self.comparison is not None:
            parts.append(self.baseline(self.comparison))
        parts.append(load_sections(run.dir))
        parts.append(self.controls())
        ordered = sorted(enumerate(run.results), key=lambda p: (_ORDER.get(p[1].status, 9), p[0]))
        parts.append('<main id="tests">')
        parts.extend(self.test(result, number) for number, result in ordered)
        parts.append(self.unfinished())
        parts.append("</main>")
        parts.append(f'<footer>tamesu {esc(__version__)} · run directory {self.link(run.dir, run.name)} · '
                     "this file loads nothing from the network</footer>")
        page = Template(_asset("page.html"))
        return page.substitute(title=esc(f"tamesu · {run.name}"), style=_asset("report.css") + waterfall_css(),
                               script=_asset("report.js"), body="\n".join(p for p in parts if p))

    def header(self) -> str:
        s = self.run.summary
        facts = []
        if s.started_at:
            facts.append(f"started {esc(s.started_at.replace('T', ' ')[:19])} UTC")
        facts.append(f"took {ms(s.duration_ms)}")
        facts.append(f"exit code {s.exit_code}")
        plan = self.run.plan
        if plan is not None and plan.shards:
            facts.append(f"shard{'s' if len(plan.shards) > 1 else ''} {esc(', '.join(plan.shards))}")
        notes = [f'<p class="note">{esc(text)}</p>' for text in (s.interrupted, s.stopped) if text]
        notes.extend(f'<p class="note">warning: {esc(w)}</p>' for w in s.warnings)
        if noted := along_the_way.of_run(self.run):
            notes.append(f'<p class="note along-the-way">{esc(noted)}</p>')
        return (f'<header><h1>tamesu <span class="run-name">{esc(self.run.name)}</span></h1>'
                f'<p class="facts">{" · ".join(facts)}</p>{"".join(notes)}</header>')

    def summary(self) -> str:
        c = self.run.summary.counts
        cells = []
        shown = ("passed", "failed", "error", "quarantined", "skipped", *(("inconclusive",) if c.get("inconclusive")
                                                                          else ()))
        for status in shown:
            cells.append(f'<div class="count s-{status}"><b>{c.get(status, 0)}</b> {status}</div>')
        total = c.get("total", len(self.run.results))
        return (f'<section class="summary" aria-label="summary"><div class="counts">{"".join(cells)}'
                f'<div class="count total"><b>{total}</b> tests</div></div>{_svg.status_bar(c)}</section>')

    def baseline(self, cmp: Comparison) -> str:
        rows = []
        for change in cmp.regressions:
            rows.append(f'<li class="bad">regression <a href="#{esc(self.anchor(change.id))}">{esc(change.id)}</a>: '
                        f"was {esc(change.before)}, now {esc(change.now)}: {esc(change.reason)}</li>")
        for change in cmp.fixes:
            rows.append(f'<li class="good">fixed <a href="#{esc(self.anchor(change.id))}">{esc(change.id)}</a>: '
                        f"was {esc(change.before)}</li>")
        for change in cmp.quarantined:
            rows.append(f'<li class="warn">quarantined {esc(change.id)}: was {esc(change.before)}, '
                        f"not counted as a regression</li>")
        rows.extend(f'<li class="warn">skipped now {esc(c.id)}: was {esc(c.before)}: {esc(c.reason)}</li>'
                    for c in cmp.skipped)
        rows.extend(f"<li>new {esc(i)}</li>" for i in cmp.new)
        rows.extend(f"<li>removed {esc(i)}</li>" for i in cmp.removed)
        metrics = "".join(f"<tr><td>{esc(m.id)}</td><td>{esc(describe_change(m))}</td></tr>"
                          for m in cmp.metric_changes)
        table = (f'<div class="scroll"><table><caption>metrics that moved more than {cmp.tolerance:.0%}'
                 f"</caption>{metrics}</table></div>") if metrics else ""
        return (f'<section class="baseline"><h2>Compared with {esc(cmp.baseline)}</h2>'
                f"<p>{esc(cmp.headline())}</p><ul>{''.join(rows)}</ul>{table}</section>")

    def controls(self) -> str:
        buttons = "".join(f'<button type="button" data-filter="{s}">{label}</button>' for s, label in [
            ("all", "all"), ("failed", "failed"), ("error", "errors"), ("inconclusive", "inconclusive"),
            ("quarantined", "quarantined"), ("passed", "passed"), ("skipped", "skipped")])
        return (f'<nav class="controls js-only" aria-label="filters">{buttons}'
                '<input type="search" placeholder="search tests" aria-label="search tests">'
                '<button type="button" data-expand="1">open all</button>'
                '<button type="button" data-expand="0">close all</button>'
                '<span class="shown" aria-live="polite"></span></nav>')

    # -------------------------------------------------------------- one test

    def anchor(self, test_id: str) -> str:
        """The test's id in the page, one per test: readable (`t-shop-refund`), and a short hash of the id when
        two tests of the page read alike (`a b` and `a-b` shared one, and a link went to the wrong test)."""
        readable = _readable(test_id)
        if readable not in self._shared:
            return readable
        return f"{readable}-{hashlib.sha1(test_id.encode()).hexdigest()[:6]}"

    def test(self, result: TestResult, number: int) -> str:
        opened = " open" if result.status in _NOT_PASSED else ""
        runs_note = f" · {result.runs_said()}" if result.total_runs > 1 else ""
        reason = ""
        if result.status in _NOT_PASSED:
            reason = _why(failure_reason(result) or result.status)
        elif result.status == "skipped":
            reason = f'<span class="why">{esc(result.skip_reason or "")}</span>'
        head = (f'<summary><span class="badge s-{result.status}">{_BADGES[result.status]}</span> '
                f'<span class="name">{esc(result.id)}</span>'
                f'<span class="meta">{ms(result.duration_ms)}{runs_note}</span>{reason}</summary>')
        facts = [f"target <b>{esc(result.target)}</b>"]
        if result.case:
            facts.append(f"case <b>{esc(result.case)}</b>")
        if result.tags:
            facts.append("tags " + " ".join(f'<span class="tag">{esc(t)}</span>' for t in result.tags))
        source = self.run.source(result.id)
        if source is not None and source.file:
            facts.append(f"defined in {self._file_name(source.file)}:{source.line or 1}")
        body = [f'<p class="facts">{" · ".join(facts)}</p>']
        if result.quarantine:
            body.append(f'<p class="note">quarantined: {esc(result.quarantine)} (a failure does not fail the run)</p>')
        if result.status == "skipped" and result.skip_reason:
            body.append(f'<p class="note">skipped: {esc(result.skip_reason)}</p>')
        if result.reason:
            body.append(f'<p class="note">{esc(result.reason)}</p>')
        if result.stats is not None:
            body.append(stats_html(result))
        if result.total_runs > 1:
            body.append(self.repeat_metrics(result))
        body.extend(self.run_section(result, summary) for summary in result.runs)
        return (f'<details class="test" id="{esc(self.anchor(result.id))}" data-status="{result.status}" '
                f'data-name="{esc(result.id.lower())}"{opened}>{head}<div class="body">{"".join(body)}</div>'
                "</details>")

    def _file_name(self, file: str) -> str:
        """A suite file's name, escaped: once a file, not once a test."""
        name = self._file_names.get(file)
        if name is None:
            name = self._file_names[file] = esc(Path(file).name)
        return name

    def repeat_metrics(self, result: TestResult) -> str:
        """A repeated test: each metric's mean over the runs, and how it moved from run to run."""
        rows = []
        runs = sorted(result.runs, key=lambda r: r.run)
        for name, mean in sorted(mean_metrics(result).items()):
            values = [r.metrics[name] for r in runs if name in r.metrics]
            chart = _svg.sparkline(values, f"{name} per run")
            rows.append(f"<tr><th>{esc(name)}</th><td>{num(mean)}</td><td>{num(min(values))}–{num(max(values))}"
                        f"</td><td>{chart}</td></tr>")
        if not rows:
            return ""
        return ('<div class="scroll"><table class="metrics"><caption>metrics over the runs</caption>'
                f"<tr><th>metric</th><th>mean</th><th>range</th><th>per run</th></tr>{''.join(rows)}</table></div>")

    def run_section(self, result: TestResult, summary: RunSummary) -> str:
        folder = self.run.dir / summary.dir
        detail = self.run.run_result(summary)
        title = f"run {summary.run}" + (f" (attempt {summary.attempts})" if summary.attempts > 1 else "")
        files = other_files(folder)
        kept, count = files.kept, files.count
        folder_text = "folder" if count <= len(kept) else f"folder ({count} files)"
        below = self._below(folder)
        if below is None:
            links = " · ".join([self.link(folder / "result.json", "result.json"),
                                self.link(folder / "transcript.json", "transcript.json"),
                                *(self.link(path, path.relative_to(folder).as_posix()) for path in kept),
                                self.link(folder, folder_text)])
        else:
            # the folder's link quoted once and its two files' joined to it: what `link` makes of each (a quoted
            # path holds nothing to escape; quoting is by character, so quote(a + b) is quote(a) + quote(b))
            href = quote(below)
            links = " · ".join([f'<a href="{href}/result.json">result.json</a>',
                                f'<a href="{href}/transcript.json">transcript.json</a>',
                                *(self.link(path, path.relative_to(folder).as_posix()) for path in kept),
                                f'<a href="{href}">{esc(folder_text)}</a>'])
        status = f'<span class="badge s-{summary.status}">{_BADGES[summary.status]}</span>'
        extra = ""
        if detail is not None:
            extra = f" · {esc(detail.end_reason.replace('_', ' '))} · {ms(detail.duration_ms)}"
        parts = [f'<section class="run"><h3>{status} {esc(title)}{extra}</h3><p class="links">{links}</p>']
        if summary.fault is not None:
            again = f" (made {summary.reruns + 1} times)" if summary.reruns else ""
            # the reason once: the error or the failed checks are shown below it (an inconclusive run's
            # checks are not the agent's failures: the simulated user's reason is said here)
            failures = [] if summary.status == "inconclusive" else \
                detail.failed_assertions if detail is not None else summary.failures
            why = fault_said_below(summary, failures)
            parts.append(f'<p class="note">fault: <b>{esc(summary.fault)}</b>{esc(again)}'
                         + ("" if why is None else f": {esc(why)}") + "</p>")
        if summary.error:
            parts.append(f'<p class="error">{esc(summary.error)}</p>')
        if detail is None:
            parts.append(self.assertions(summary.failures, only_failures=True))
        else:
            parts.append(self.assertions(detail.assertions))
        if summary.not_evaluated:
            said = not_evaluated(summary.not_evaluated, bool(summary.error), summary.status == "skipped",
                                 detail.skip_reason if detail is not None else None)
            parts.append(f'<p class="note not-evaluated">{esc(said)}</p>')
        if detail is not None:  # what the run warned of (its traces that never came), as run.json has it
            parts.extend(f'<p class="note">warning: {esc(w)}</p>' for w in detail.warnings)
        if detail is not None:
            if "audio.wav" in files.top or any(t.agent.audio is not None for t in detail.turns):
                parts.append(self.audio(detail, folder))
            plan = self.run.plan
            trace_url = plan.trace_url if plan is not None else None
            parts.append(_html_turns.chat(detail, folder, "spans.json" in files.top, trace_url))
            parts.append(_html_turns.metrics(detail))
            parts.append(_html_turns.events(detail))
        parts.append("</section>")
        return "".join(parts)

    def audio(self, detail: RunResult, folder: Path) -> str:
        """An audio run's recording (user left, agent right) and both sides' speech on its timeline."""
        wav = folder / "audio.wav"
        spoken = [t for t in detail.turns if t.agent.audio is not None]
        if not wav.is_file() and not spoken:
            return ""
        user, agent, marks = [], [], []
        for t in spoken:
            a = t.agent.audio
            assert a is not None
            if a.user_from_ms is not None and a.user_to_ms is not None:
                user.append(_svg.Span(f"user, turn {t.index}: {short(a.said, 80)}", a.user_from_ms, a.user_to_ms))
            if a.agent_from_ms is not None and a.agent_to_ms is not None:
                heard = a.agent_said if a.agent_said is not None else t.agent.text
                agent.append(_svg.Span(f"agent, turn {t.index}: {short(heard, 80)}", a.agent_from_ms,
                                       a.agent_to_ms))
            if a.interrupted_at_ms is not None:
                marks.append(_svg.Mark(f"the user talks over turn {t.index}", a.interrupted_at_ms))
        end = max([s.end for s in [*user, *agent]] + [1.0])
        chart = _svg.speech(user, agent, marks, end, "speech of both sides")
        player = ""
        if wav.is_file():
            player = (f'<audio controls preload="none" src="{esc(quote(self.relative(wav)))}"></audio> '
                      f'{self.link(wav, "audio.wav")} (user left, agent right)')
        figure = (f"<figure class=\"timeline-box\">{chart}<figcaption>speech from 0 to {ms(end)}: the user above, "
                  "the agent below (as heard on the playback clock)</figcaption></figure>" if chart else "")
        return f'<div class="audio-box">{player}{figure}</div>'

    def assertions(self, items: list[AssertionResult], only_failures: bool = False) -> str:
        if not items:
            return ""
        rows = []
        for a in items:
            mark = '<span class="ok">✓</span>' if a.passed else '<span class="ko">✗</span>'
            name = esc(a.name) + (f' <span class="dim">turn {esc(a.on_turn)}</span>' if a.on_turn is not None else "")
            by = []
            if a.score is not None:
                by.append(f"score {num(a.score)}")
            if a.model:
                by.append(esc(a.model))
            if a.fake:
                by.append("fake judge")
            if a.prompt_version:
                by.append(esc(a.prompt_version))
            if len(a.attempts) > 1 or any(t.outcome != "accepted" for t in a.attempts):
                by.append(esc("; ".join(f"attempt {t.number} {t.outcome}" + (f": {t.reason}" if t.reason else "")
                                       for t in a.attempts)))
            unsupported = set(a.unsupported_evidence)
            evidence = "".join(
                f"<blockquote>{esc(item)}{' <em>(not in the transcript)</em>' if item in unsupported else ''}"
                "</blockquote>" for item in evidence_to_show(a.reason, a.evidence, a.unsupported_evidence))
            dim = f'<div class="dim">{" · ".join(by)}</div>' if by else ""
            rows.append(f'<tr class="{"pass" if a.passed else "fail"}"><td>{mark}</td><td class="kind">{name}</td>'
                        f'<td><div class="reason">{esc(a.reason)}</div>{evidence}{dim}</td></tr>')
        caption = "failing assertions" if only_failures else "assertions"
        return (f'<div class="scroll"><table class="assertions"><caption>{caption}</caption>'
                f"{''.join(rows)}</table></div>")

    def unfinished(self) -> str:
        missing = self.run.not_finished()
        if not missing:
            return ""
        why = self.run.summary.stopped or self.run.summary.interrupted or "not run"
        items = "".join(f"<li>{esc(entry.id)}</li>" for entry in missing)
        return f'<section class="unfinished"><h2>Not finished ({esc(why)})</h2><ul>{items}</ul></section>'


def stats_html(result: TestResult) -> str:
    """A repeated test's statistics: pass rate and interval, pass@k and pass^k, whether the verdict is decided."""
    stats = result.stats
    assert stats is not None
    low, high = stats.interval
    decided = {"pass": "decided: passes", "fail": "decided: fails", None: "undecided"}[stats.decided]
    rate = f"{stats.passes}/{stats.runs} = {stats.rate:.2f} [{low:.2f}, {high:.2f}] at {stats.confidence:.0%} " \
        "(Wilson)" if stats.runs else stats.line()
    rows = [f"<tr><th>pass rate</th><td>{esc(rate)}</td></tr>",
            f"<tr><th>verdict</th><td>{decided} against pass_threshold {stats.threshold:g}</td></tr>"]
    rows += [f"<tr><th>k = {esc(k)}</th><td>pass@{esc(k)} {stats.pass_at_k.get(k, 0):.3f} · pass^{esc(k)} {v:.3f}"
             "</td></tr>" for k, v in stats.pass_hat_k.items()]
    if stats.adaptive is not None:
        a = stats.adaptive
        rows.append(f"<tr><th>adaptive</th><td>{result.total_runs} of {a.max_runs} runs ({a.runs_saved} saved), "
                    f"{esc(a.rule)} [{a.interval[0]:.2f}, {a.interval[1]:.2f}] at {a.confidence:.0%}</td></tr>")
    return f'<div class="scroll"><table class="stats"><caption>statistics of the runs</caption>{"".join(rows)}' \
           "</table></div>"


def render_html(run: LoadedRun, base: Path, comparison: Comparison | None = None) -> str:
    return _Page(run, base, comparison).render()


@register("reports", "html", default_file="report.html")
def write_html(run: LoadedRun, path: Path, comparison: Comparison | None = None,
               links_from: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(run, links_from or path.parent, comparison), encoding="utf-8")


_NOT_ALNUM = re.compile(r"[\W_]")
"""Exactly the characters `str.isalnum` refuses (`\\w` is alphanumeric or `_`; every code point checked)."""


def _readable(test_id: str) -> str:
    return "t-" + _NOT_ALNUM.sub("-", test_id)
