"""The view's pages: runs over time, tests and their flakiness, one test's history, two runs compared, judge
drift. Every page is one bounded read of the store rendered on the server."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tamesu.report.baseline import compare, describe_change
from tamesu.report.waterfall import TurnSpans, waterfall
from tamesu.report.words import fault_said_below, not_evaluated
from tamesu.store.db import Store
from tamesu.store.queries import ONE_RUN, WINDOW, HistoryEntry, Reader
from tamesu.view._charts import constant, constant_line, pass_rate_bars, trend
from tamesu.view._html import (
    chat,
    esc,
    link,
    page,
    percent,
    run_link,
    status,
    table,
    test_link,
)

_SECURITY_HEADERS = {
    # the pages load nothing from anywhere, and say so to the browser
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
    "X-Content-Type-Options": "nosniff",
}


def _html(title: str, body: str, active: str = "", code: int = 200) -> HTMLResponse:
    return HTMLResponse(page(title, body, active), status_code=code, headers=_SECURITY_HEADERS)


def _commit(value: str | None) -> str:
    if not value:
        return '<span class="dim">–</span>'
    head, plus, changes = value.partition("+")  # `HEAD+<fingerprint>`: a checkout with uncommitted changes
    if plus:
        return f'<code title="{esc(value)}: with uncommitted changes">{esc(head[:10])}+{esc(changes[:6])}</code>'
    return f'<code>{esc(value[:10])}</code>'


def create_app(store: Store, trace_url: str | None = None) -> Starlette:
    reader = Reader(store)

    def runs_page(request: Request) -> HTMLResponse:
        runs = reader.runs(limit=100)
        chart = pass_rate_bars([(r.id, r.pass_rate) for r in reversed(runs)])
        # every status the pass rate counts has its column, so the columns add up to its tests: a quarantined
        # failure (it fails no run, and counts against the rate), an inconclusive test when a run has one
        shown = ["passed", "failed", "error", "quarantined",
                 *(["inconclusive"] if any(r.counts.get("inconclusive") for r in runs) else [])]
        rows = [(run_link(r.id), esc(r.started_at[:19].replace("T", " ")), _commit(r.commit), esc(r.branch or ""),
                 esc(", ".join(r.shards) or "–"), esc(r.counts.get("total", 0)),
                 # an error is the environment's (the agent unreachable, a judge's model down), as the run's own
                 # last line says it apart: not the agent's failure
                 *(status(name) + f" {r.counts.get(name, 0)}" for name in shown),
                 percent(r.pass_rate) + ("" if r.finished else ' <span class="tag">not finished</span>')
                 + _ended(r.exit_code))
                for r in runs]
        columns = {"error": "errors"}
        body = (f"<h2>Pass rate, oldest to newest</h2>{chart}"
                + table(["run", "started (UTC)", "commit", "branch", "shards", "tests",
                         *(columns.get(name, name) for name in shown), "pass rate"], rows,
                        "no runs in the store yet: `tamesu run` with a store configured, or `tamesu store import "
                        "RUN_DIR`"))
        return _html("Runs", body, "/")

    def run_page(request: Request) -> HTMLResponse:
        run_id = request.query_params.get("id", "")
        run = reader.run(run_id)
        loaded = reader.as_loaded_run(run_id, run) if run else None
        if run is None or loaded is None:
            return _html("No such run", f"<p>{esc(run_id)} is not in the store.</p>", code=404)
        others = [r.id for r in reader.runs(limit=50) if r.id != run_id]
        picker = "".join(f'<option value="{esc(o)}">{esc(o)}</option>' for o in others)
        form = (f'<form class="inline" action="/compare" method="get"><input type="hidden" name="b" '
                f'value="{esc(run_id)}"><label>compare with <select name="a">{picker}</select></label>'
                f"<button>compare</button></form>") if others else ""
        rows = [(test_link(r.id), status(r.status), f"{r.passed_runs}/{r.total_runs}",
                 esc(f"{r.duration_ms:.0f} ms"), _reason(r)) for r in loaded.results]
        folders = ", ".join(f"<code>{esc(d)}</code>" for d in run.dirs)
        meta = (f"<p>commit {_commit(run.commit)} · branch {esc(run.branch or '–')} · shards "
                f"{esc(', '.join(run.shards) or '–')} · folders: {folders}</p>")
        return _html(f"Run {run_id}", meta + form + table(["test", "status", "runs passed", "time", "why"], rows))

    def tests_page(request: Request) -> HTMLResponse:
        tests = reader.tests()
        flaky = [t for t in tests if t.flaky_commits]
        rows = [(test_link(t.test_id), percent(t.pass_rate), esc(t.results), status(t.last_status),
                 ('<span class="tag">flaky</span> ' + ", ".join(esc(c) if c == ONE_RUN else _commit(c)
                                                                 for c in t.flaky_commits))
                 if t.flaky_commits else "") for t in tests]
        uncommitted = "" if any(r.commit for r in reader.runs(limit=WINDOW)) else (
            " These runs have no commit (not a git checkout): a test is compared across runs only on one commit, "
            "so only the repeats of one result show it flaky.")
        body = (f"<p>Over the newest {WINDOW} runs. {len(flaky)} flaky test(s): passed and failed on the same "
                f"commit, or among the repeats of one result.{uncommitted}</p>"
                + table(["test", "pass rate", "results", "last", "flaky on"], rows))
        return _html("Tests", body, "/tests")

    def test_page(request: Request) -> HTMLResponse:
        test_id = request.query_params.get("id", "")
        history = reader.history(test_id)
        if not history:
            return _html("No such test", f"<p>{esc(test_id)} has no results in the store.</p>", code=404)
        # what happened first (the transcripts, newest open), then how it went over time
        return _html(test_id, _history(history, trace_url) + _pass_hat_k(history) + _trends(history), "/tests")

    def compare_page(request: Request) -> HTMLResponse:
        before_id, now_id = request.query_params.get("a", ""), request.query_params.get("b", "")
        runs = reader.runs(limit=100)
        if not before_id or not now_id:
            if len(runs) < 2:
                return _html("Compare", "<p>Two runs are needed to compare.</p>", "/compare")
            now_id, before_id = now_id or runs[0].id, before_id or runs[1].id
        before, now = reader.as_loaded_run(before_id), reader.as_loaded_run(now_id)
        if before is None or now is None:
            missing = before_id if before is None else now_id
            return _html("No such run", f"<p>{esc(missing)} is not in the store.</p>", "/compare", code=404)
        tolerance = _float(request.query_params.get("tolerance"), 0.2)
        result = compare(now, before, tolerance)
        sections: list[tuple[str, list[tuple[str, ...]], list[str]]] = [
            ("Regressions", [(test_link(c.id), status(c.before), status(c.now), esc(c.reason))
                             for c in result.regressions], ["test", "was", "now", "why"]),
            ("Fixes", [(test_link(c.id), status(c.before), status(c.now), esc(c.reason)) for c in result.fixes],
             ["test", "was", "now", "why it failed"]),
            ("Quarantined (not regressions)", [(test_link(c.id), status(c.before), status(c.now), esc(c.reason))
                                               for c in result.quarantined], ["test", "was", "now", "why"]),
            ("Metric changes", [(test_link(m.id), esc(describe_change(m))) for m in result.metric_changes],
             ["test", "change"]),
            ("Skipped now", [(test_link(c.id), status(c.before), esc(c.reason)) for c in result.skipped],
             ["test", "was", "why"]),
            ("New tests", [(test_link(i),) for i in result.new], ["test"]),
            ("Removed tests", [(esc(i),) for i in result.removed], ["test"]),
        ]
        body = (f"<p>{run_link(before_id)} → {run_link(now_id)}: <b>{esc(result.headline())}</b> "
                f"(metric tolerance {tolerance:g})</p>"
                + "".join(f"<h2>{esc(title)}</h2>" + table(headers, rows, "none") for title, rows, headers in sections))
        return _html("Compare", body, "/compare")

    def drift_page(request: Request) -> HTMLResponse:
        cases = reader.drift()
        parts = []
        for case in cases:
            rows = [(run_link(v["run_id"]), esc(v["model"]), esc(v["prompt_version"] or "–"),
                     status("passed" if v["passed"] else "failed"),
                     esc("" if v["score"] is None else f"{v['score']:g}"), esc(v["reason"])) for v in case.verdicts]
            parts.append(f"<h2>{test_link(case.test_id)} · <code>{esc(case.assertion)}</code></h2>"
                         + table(["run", "model", "prompt", "verdict", "score", "reason"], rows)
                         + f"<details><summary>the transcript they graded</summary>{chat(case.transcript)}</details>")
        body = ("<p>The same transcript graded differently by another judge model or prompt version.</p>"
                + ("".join(parts) or '<p class="dim">no drift: every transcript graded twice got one verdict</p>'))
        return _html("Judge drift", body, "/drift")

    routes = [Route("/", runs_page), Route("/run", run_page), Route("/tests", tests_page),
              Route("/test", test_page), Route("/compare", compare_page), Route("/drift", drift_page)]
    return Starlette(routes=routes)


def _reason(result: Any) -> str:
    """Why a test did not pass, then the checks its root cause kept from grading, as the reports say it."""
    from tamesu.report.baseline import failure_reason

    if result.status == "passed":
        return ""
    said = esc(failure_reason(result))
    counted = next((run for run in result.runs if run.not_evaluated), None)
    if counted is not None:
        line = not_evaluated(counted.not_evaluated, bool(counted.error), counted.status == "skipped")
        said += f'<br><span class="not-evaluated">{esc(line)}</span>'
    return said


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text else default
    except ValueError:
        return default


def _pass_hat_k(history: list[HistoryEntry]) -> str:
    """pass^k of each k over time (oldest left), for a test that repeats: how often every one of k tries works."""
    ordered = [entry for entry in reversed(history) if entry.stats]
    ks = sorted({k for entry in ordered for k in (entry.stats or {}).get("pass_hat_k", {})}, key=int)
    charts = []
    for k in ks:
        values, labels = [], []
        for entry in ordered:
            value = (entry.stats or {}).get("pass_hat_k", {}).get(k)
            if value is not None:
                values.append(float(value))
                labels.append(entry.run_id)
        charts.append(f"<h2>pass^{esc(k)}</h2>{trend(values, labels, f'pass^{k}', None)}")
    return "".join(charts)


def _trends(history: list[HistoryEntry]) -> str:
    """Each metric's mean per result, oldest left, against its SLO; a metric that never changed (and meets its
    SLO) is one line, not a flat chart. A run that errored or was skipped is left out, as `--baseline` leaves it
    (report.load.mean_metrics): it graded nothing, and its `turns: 0` would read as the agent's change."""
    ordered = [(entry.run_id, [run for run in entry.runs if run.status not in ("error", "skipped")])
               for entry in reversed(history)]
    names = sorted({name for _, runs in ordered for run in runs for name in run.metrics})
    slo: dict[str, float] = {}
    for entry in reversed(history):
        slo.update(entry.slo)
    charts, constants = [], []
    for name in names:
        values, labels = [], []
        for run_id, runs in ordered:
            measured = [run.metrics[name] for run in runs if name in run.metrics]
            if measured:
                values.append(sum(measured) / len(measured))
                labels.append(run_id)
        limit = slo.get(name)
        if constant(values) and (limit is None or values[0] <= limit):
            constants.append(constant_line(name, values))
            continue
        over = sum(1 for v in values if limit is not None and v > limit)
        note = f" · SLO ≤ {limit:g}, over it in {over} of {len(values)}" if limit is not None else ""
        charts.append(f"<h2><code>{esc(name)}</code>{esc(note)}</h2>{trend(values, labels, name, limit)}")
    folded = f'<h2>Unchanged metrics</h2><ul class="constants">{"".join(constants)}</ul>' if constants else ""
    return ("<h2>Metrics over runs</h2>" if charts else "") + "".join(charts) + folded


def _waterfalls(stored: dict[str, Any]) -> dict[str, str]:
    """Each turn's waterfall as the HTML report draws it, from what the store kept (a row it cannot read, as
    from a newer tamesu, is left out rather than failing the page)."""
    drawn = {}
    for index, data in stored.items():
        try:
            drawn[index] = waterfall(int(index), TurnSpans.model_validate(data))
        except (ValueError, TypeError):
            continue
    return drawn


def _history(history: list[HistoryEntry], trace_url: str | None) -> str:
    rows = []
    for newest, entry in enumerate(history):
        runs = []
        for run in entry.runs:
            verdicts = table(["assertion", "verdict", "score", "judge", "reason"], [
                (f"<code>{esc(a['name'])}</code>" + (f" (turn {esc(a['on_turn'])})" if a["on_turn"] else ""),
                 status("passed" if a["passed"] else "failed"),
                 esc("" if a["score"] is None else f"{a['score']:g}"),
                 esc(" ".join(x for x in (a["model"], a["prompt_version"]) if x)), esc(a["reason"]))
                for a in run.assertions], "no assertions")
            traces = ""
            if run.trace_ids:
                shown = [link(trace_url.replace("{trace_id}", tid), tid) if trace_url else f"<code>{esc(tid)}</code>"
                         for tid in run.trace_ids]
                traces = "<p>traces by turn: " + " · ".join(f"{i}: {s}" for i, s in enumerate(shown, 1)) + "</p>"
            error = f'<p class="error">{esc(run.error)}</p>' if run.error else ""
            if run.fault:
                # the reason once, as the reports say it: not again when it is the error or the checks listed below
                why = fault_said_below(run, run.failures)
                error += f"<p>fault: <b>{esc(run.fault)}</b>" + ("" if why is None else f": {esc(why)}") + "</p>"
            if run.not_evaluated:
                said = not_evaluated(run.not_evaluated, bool(run.error), run.status == "skipped")
                error += f'<p class="note not-evaluated">{esc(said)}</p>'
            opened = " open" if newest == 0 else ""  # the newest result's transcripts are read first: shown open
            attempt = "" if run.attempt == 1 else f" (attempt {run.attempt})"
            runs.append(f"<details{opened}><summary>run {run.number}{attempt}"
                        f" {status(run.status)}</summary>{error}{chat(run.transcript, _waterfalls(run.spans))}{traces}"
                        f"{verdicts}</details>")
        stats = entry.stats or {}
        about = ""
        if stats:
            low, high = stats.get("interval", (0, 1))
            hats = " ".join(f"pass^{k} {v:.2f}" for k, v in stats.get("pass_hat_k", {}).items())
            about = f"<p>rate {stats.get('rate', 0):.2f} [{low:.2f}, {high:.2f}] · {esc(hats)}</p>"
        if entry.reason:
            about += f"<p>{esc(entry.reason)}</p>"
        rows.append((run_link(entry.run_id), esc(entry.started_at[:19].replace("T", " ")), _commit(entry.commit),
                     status(entry.status), about + "".join(runs)))
    return "<h2>History, newest first</h2>" + table(["run", "started (UTC)", "commit", "status", "runs"], rows)


_EXIT_WORDS = {2: "a suite error", 3: "an infrastructure error", 4: "the budget ran out", 129: "interrupted (SIGHUP)",
               130: "interrupted (Ctrl-C)", 143: "interrupted (SIGTERM)"}


def _ended(code: int | None) -> str:
    """A run that ended otherwise than by its verdicts (interrupted, exit 3 or 4): its pass rate is of what
    finished, so the row says how it ended (an interrupted run read as a green 100%)."""
    if code is None or code in (0, 1):
        return ""
    return f' <span class="tag">exit {code}: {esc(_EXIT_WORDS.get(code, "stopped"))}</span>'
