"""JUnit XML, the format every CI system reads: one <testsuite> per suite, one <testcase> per test (and case).

Mapping: failed -> <failure> with every failing assertion's reason; error (the agent unreachable, a hook
failed) -> <error>; inconclusive (the simulated user at fault) -> <failure type="inconclusive"> whose message is the
audit's finding; skipped -> <skipped>; quarantined -> <skipped> whose message says it was quarantined and
carries the failure, because a quarantined test must not fail the CI job yet must stay visible. A test the run
planned but never finished (killed, fail-fast) is <skipped> too, so the file still lists every test.

A test that ran more than once carries its statistics as <properties> (`tamesu.pass_rate`, `tamesu.interval`,
`tamesu.pass^k`, `tamesu.decided`...), and every run that did not pass its fault (`tamesu.run.N.fault`).
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

from tamesu.plugins import register
from tamesu.report.load import LoadedRun, shown_path
from tamesu.report.words import (
    echoed_failure,
    evidence_to_show,
    failed_turns,
    failure_reason,
    fault_said_below,
    not_evaluated,
)
from tamesu.results.records import RunSummary, TestResult

# XML 1.0 cannot hold most control characters, and an agent's text may contain anything.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3f}"


def _timestamp(iso: str) -> str | None:
    # xs:dateTime without fractions, which strict readers (the Ant schema) reject
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$", iso)
    return match.group(1) + (match.group(2) or "") if match else None


def failure_text(result: TestResult, run: LoadedRun) -> str:
    """Every failing assertion of every run, with its evidence and where the artifacts are."""
    lines: list[str] = []
    several = result.total_runs > 1
    if several:
        lines.append(f"{result.runs_said()} (needed {result.pass_threshold:.0%})")
    if result.reason:
        lines.append(result.reason)
    for summary in result.runs:
        prefix = f"run {summary.run}: " if several else ""
        inconclusive = summary.status == "inconclusive"
        detail = None if inconclusive else run.run_result(summary)
        failures = [] if inconclusive else detail.failed_assertions if detail is not None else summary.failures
        if summary.fault is not None:
            # the reason once: a fault whose reason is the error or a failure said below is named alone
            why = fault_said_below(summary, failures)
            lines.append(f"{prefix}fault {summary.fault}" + ("" if why is None else f": {why}"))
        if inconclusive:
            continue  # the assertions it failed are not the agent's failures
        if summary.error:
            lines.append(f"{prefix}error: {summary.error}")
        echoed = echoed_failure(summary.error, failures)
        for failure in failures:
            if failure is echoed:
                continue  # the check the error line came from
            where = f" (turn {failure.on_turn})" if failure.on_turn is not None else ""
            judge = " (fake judge)" if failure.fake and "fake judge" not in failure.reason else ""
            lines.append(f"{prefix}{failure.name}{where}: {failure.reason}{judge}")
            lines.extend(f"    evidence: {item}" + (" (not in the transcript)" if item in failure.unsupported_evidence
                                                      else "")
                         for item in evidence_to_show(failure.reason, failure.evidence, failure.unsupported_evidence))
        if summary.not_evaluated:
            skipped = summary.status == "skipped"
            lines.append(f"{prefix}{not_evaluated(summary.not_evaluated, bool(summary.error), skipped)}")
        if summary.error or failures:
            lines.append(f"    artifacts: {shown_path(run.dir / summary.dir)}")
    return "\n".join(lines)


def first_reason(result: TestResult) -> str:
    return failure_reason(result) or result.status


def transcript_lines(run: LoadedRun, summary: RunSummary) -> list[str]:
    """One run's transcript as `role: text` lines, as JUnit's <system-out> and the pytest plug-in show it: a turn
    that failed says why beside its answer, and one the timeout cut short says it got no answer."""
    transcript = run.transcript(summary)
    if transcript is None:
        return []
    detail = run.run_result(summary)
    failed = failed_turns(detail.events) if detail is not None else {}
    lines = []
    for line in transcript.lines:
        why = failed.get(line.turn) if line.role == "agent" and line.turn is not None else None
        # an answer that never came read as the agent saying nothing: the turn says why it failed
        lines.append(f"{line.role}: {line.text}" + ("" if why is None else
                                                    f"{' ' if line.text else ''}(the turn failed: {why})"))
        if line.cut is not None:  # the timeout ran out while the agent answered: no agent line follows
            lines.append(f"agent: (no answer: {line.cut})")
    return lines


def _transcript(result: TestResult, run: LoadedRun) -> str:
    parts = []
    for summary in result.runs:
        lines = transcript_lines(run, summary)
        if not lines:
            continue
        if result.total_runs > 1:
            parts.append(f"--- run {summary.run}")
        parts.extend(lines)
    return "\n".join(parts)


def _testcase(parent: ET.Element, result: TestResult, run: LoadedRun) -> None:
    source = run.source(result.id)
    case = ET.SubElement(parent, "testcase", name=_clean(result.test), classname=_clean(result.suite),
                         time=_seconds(result.duration_ms))
    if source is not None and source.file:
        # relative to where tamesu runs (the repository root in CI), as GitLab and others expect
        case.set("file", shown_path(Path(source.file)))
        if source.line:
            case.set("line", str(source.line))
    _properties(case, result)
    if result.status == "inconclusive":
        element = ET.SubElement(case, "failure", message=_clean(first_reason(result)), type="inconclusive")
        element.text = _clean(failure_text(result, run))
    elif result.status == "failed":
        element = ET.SubElement(case, "failure", message=_clean(first_reason(result)), type="assertion")
        element.text = _clean(failure_text(result, run))
    elif result.status == "error":
        element = ET.SubElement(case, "error", message=_clean(first_reason(result)),
                                type="suite" if result.suites_error else "infrastructure")
        element.text = _clean(failure_text(result, run))
    elif result.status == "skipped":
        ET.SubElement(case, "skipped", message=_clean(result.skip_reason or "skipped"))
    elif result.status == "quarantined":
        message = f"quarantined ({result.quarantine}): {result.underlying}: {first_reason(result)}"
        element = ET.SubElement(case, "skipped", message=_clean(message))
        element.text = _clean(failure_text(result, run))
    if result.status != "passed" and result.status != "skipped":
        transcript = _transcript(result, run)
        if transcript:
            ET.SubElement(case, "system-out").text = _clean(transcript)


def _properties(case: ET.Element, result: TestResult) -> None:
    found: list[tuple[str, str]] = []
    stats = result.stats
    if stats is not None:
        low, high = stats.interval
        # tamesu.runs is the runs the rate is of; the others ran too, and said nothing of the agent
        found += [("tamesu.runs", str(stats.runs)), ("tamesu.total_runs", str(result.total_runs)),
                  *[(f"tamesu.{name}", str(count)) for name, count in (
                      ("inconclusive_runs", result.inconclusive_runs), ("error_runs", result.error_runs)) if count],
                  ("tamesu.passes", str(stats.passes)),
                  # no rate of no runs: "0.0000" read as an agent that failed every time
                  *([("tamesu.pass_rate", f"{stats.rate:.4f}"), ("tamesu.interval", f"{low:.4f} {high:.4f}")]
                    if stats.runs else []),
                  ("tamesu.confidence", f"{stats.confidence:g}"),
                  ("tamesu.decided", stats.decided or "undecided")]
        found += [(f"tamesu.pass@{k}", f"{v:.4f}") for k, v in stats.pass_at_k.items()]
        found += [(f"tamesu.pass^{k}", f"{v:.4f}") for k, v in stats.pass_hat_k.items()]
        if stats.adaptive is not None:
            found += [("tamesu.adaptive.max_runs", str(stats.adaptive.max_runs)),
                      ("tamesu.adaptive.runs_saved", str(stats.adaptive.runs_saved))]
    found += [(f"tamesu.run.{r.run}.fault", r.fault) for r in result.runs if r.fault is not None]
    if found:
        properties = ET.SubElement(case, "properties")
        for name, value in found:
            ET.SubElement(properties, "property", name=name, value=_clean(value))


def render_junit(run: LoadedRun) -> bytes:
    stamp = _timestamp(run.summary.started_at)
    root = ET.Element("testsuites", name="tamesu", time=_seconds(run.summary.duration_ms))
    by_suite: dict[str, list[TestResult]] = {}
    for result in run.results:
        by_suite.setdefault(result.suite, []).append(result)
    unfinished = run.not_finished()
    for entry in unfinished:
        by_suite.setdefault(entry.suite, [])
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite_id, (suite, results) in enumerate(by_suite.items()):
        missing = [e for e in unfinished if e.suite == suite]
        counts = {
            "tests": len(results) + len(missing),
            "failures": sum(r.status in ("failed", "inconclusive") for r in results),
            "errors": sum(r.status == "error" for r in results),
            "skipped": sum(r.status in ("skipped", "quarantined") for r in results) + len(missing),
        }
        attributes = {"name": _clean(suite), "id": str(suite_id), **{k: str(v) for k, v in counts.items()},
                      "time": _seconds(sum(r.duration_ms for r in results)), "hostname": socket.gethostname()}
        element = ET.SubElement(root, "testsuite", attributes)
        if stamp:
            element.set("timestamp", stamp)
        for result in results:
            _testcase(element, result, run)
        for entry in missing:
            case = ET.SubElement(element, "testcase", name=_clean(entry.name), classname=_clean(suite), time="0.000")
            if entry.file:  # as for a finished test: a CI's test view links it to where it is written
                case.set("file", shown_path(Path(entry.file)))
                if entry.line:
                    case.set("line", str(entry.line))
            ET.SubElement(case, "skipped", message=run.summary.stopped or run.summary.interrupted or "not run")
        for key in totals:
            totals[key] += counts[key]
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def write_junit(run: LoadedRun, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render_junit(run))


@register("reports", "junit", default_file="junit.xml")
def write_report(run: LoadedRun, path: Path | None, comparison: object = None) -> None:
    """The `junit` entry of `report.formats`."""
    assert path is not None
    write_junit(run, path)
