"""The HTML report's section for each suite's `load:` stages (`load/SUITE.json` of the run folder)."""

from __future__ import annotations

import html
from pathlib import Path

from pydantic import ValidationError

from tamesu.results.load import LoadReport, Percentiles


def _cells(p: Percentiles | None) -> str:
    if p is None:
        return "<td>-</td>" * 4
    return "".join(f"<td>{value:g}</td>" for value in (p.p50, p.p90, p.p99, p.max))


def _heads(what: str) -> str:
    return f"<th>{what} p50</th><th>p90</th><th>p99</th><th>max</th>"


def load_sections(run_dir: Path) -> str:
    """A table per suite that ran a load profile: each stage's counts and latency percentiles, in ms."""
    sections = []
    for path in sorted((run_dir / "load").glob("*.json")):
        try:
            report = LoadReport.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            continue  # a torn file of a killed run: the rest of the report still renders
        audio = any(s.time_to_first_audio_ms is not None for s in report.stages)
        token = any(s.first_token_ms is not None for s in report.stages)
        other = any(s.inconclusive or s.skipped for s in report.stages)
        head = ("<tr><th>at once</th><th>runs</th><th>passed</th><th>failed</th><th>errors</th>"
                + ("<th>other</th>" if other else "") + "<th>runs/s</th>" + _heads("turn")
                + (_heads("first token") if token else "") + (_heads("first audio") if audio else "") + "</tr>")
        rows = "".join(
            f"<tr><td>{s.concurrency}</td><td>{s.runs}</td><td>{s.passed}</td><td>{s.failed}</td>"
            f"<td>{s.errors}</td>" + (f"<td>{s.inconclusive + s.skipped}</td>" if other else "")
            + f"<td>{s.runs_per_s:g}</td>{_cells(s.turn_latency_ms)}"
            + (_cells(s.first_token_ms) if token else "") + (_cells(s.time_to_first_audio_ms) if audio else "")
            + "</tr>" for s in report.stages)
        note = "".join(f"<p class=\"note\">stage {n} ({s.concurrency} at once): {html.escape(s.cut)}</p>"
                       for n, s in enumerate(report.stages, 1) if s.cut)
        note += f"<p class=\"note\">stopped: {html.escape(report.stopped)}</p>" if report.stopped else ""
        sections.append(
            f'<section class="load"><h2>Load: {html.escape(report.suite)}</h2>'
            f"<p>{html.escape(', '.join(report.tests))}: each stage with that many conversations at once; "
            f"latencies in ms</p>{note}<div class=\"scroll\"><table>{head}{rows}</table></div></section>")
    return "".join(sections)
