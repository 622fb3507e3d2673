"""What the store keeps of a run, as plain data (no SQLAlchemy): the run and part rows, and each finished test
as `test_record` builds it. Both writers (SQLAlchemy's `db`, the stdlib's `lite`) take these."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tamesu.report.waterfall import by_turn
from tamesu.results.records import RunResult, TestResult
from tamesu.telemetry.spans import SpansFile


@dataclass
class RunInfo:
    """What a run row holds: the same for every shard of one run."""

    id: str
    started_at: str
    commit: str | None = None
    branch: str | None = None
    project: str | None = None
    tamesu_version: str | None = None


@dataclass
class PartInfo:
    """One invocation (a shard, or the whole run) and its folder."""

    dir: str
    started_at: str
    shard: str | None = None
    host: str | None = None


def test_record(result: TestResult, runs: list[RunResult], slo: dict[str, float] | None = None,
                run_dir: Path | None = None) -> dict[str, object]:
    """What the store keeps of a finished test, as plain data: small (no raw responses, no events, at most
    MAX_ROWS spans a turn), so the run pays little to hand it over and a redactor can mask it whole. The
    spans are read from the runs' spans.json in `run_dir`, the run folder."""
    by_key = {(r.run, r.attempt): r for r in runs}
    items = []
    for summary in result.runs:
        detail = by_key.get((summary.run, summary.attempts))
        transcript = transcript_of(detail) if detail is not None else []
        metrics = dict(detail.metrics if detail is not None else summary.metrics)
        graded = detail.assertions if detail is not None else summary.failures
        items.append({
            "row": {"number": summary.run, "attempt": summary.attempts, "status": summary.status,
                    "error": summary.error, "fault": summary.fault, "fault_reason": summary.fault_reason,
                    "end_reason": detail.end_reason if detail else None,
                    "duration_ms": detail.duration_ms if detail else None, "dir": summary.dir,
                    "target_type": detail.target_type if detail else None, "transcript": transcript,
                    "transcript_hash": transcript_hash(transcript) if transcript else None,
                    "trace_ids": trace_ids_of(detail) if detail else None,
                    "spans": waterfalls_of(detail, run_dir / summary.dir) if detail and run_dir else None,
                    "llm_cost_usd": metrics.get("llm_cost_usd"),
                    "llm_tokens": int(metrics["llm_tokens"]) if "llm_tokens" in metrics else None,
                    "metrics": {name: float(value) for name, value in metrics.items()},
                    "not_evaluated": summary.not_evaluated or None},
            "assertions": [{"name": a.name, "passed": a.passed, "reason": a.reason, "score": a.score,
                            "on_turn": None if a.on_turn is None else str(a.on_turn), "model": a.model,
                            "prompt_version": a.prompt_version, "fake": a.fake} for a in graded],
        })
    return {"test": {"test_id": result.id, "suite": result.suite, "name": result.test, "case_name": result.case,
                     "tags": list(result.tags), "target": result.target, "status": result.status,
                     "passed_runs": result.passed_runs, "total_runs": result.total_runs,
                     "pass_threshold": result.pass_threshold, "duration_ms": result.duration_ms,
                     "quarantine": result.quarantine, "skip_reason": result.skip_reason, "slo": slo or None,
                     "stats": result.stats.model_dump(mode="json") if result.stats else None,
                     "reason": result.reason},
            "runs": items}


def transcript_of(result: RunResult) -> list[dict[str, object]]:
    """The conversation as transcript.json has it: who said what, turn by turn."""
    lines: list[dict[str, object]] = []
    for turn in result.turns:
        if turn.user is not None:
            lines.append({"role": "user", "text": turn.user.display(), "turn": turn.index})
        if turn.cut is None:  # a turn the timeout cut short was said, never answered
            lines.append({"role": "agent", "text": turn.agent.text, "turn": turn.index})
    return lines


def transcript_hash(lines: Sequence[Mapping[str, object]]) -> str:
    text = json.dumps([[line["role"], line["text"]] for line in lines], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def waterfalls_of(result: RunResult, folder: Path) -> dict[str, object] | None:
    """Each turn's waterfall (`traces:`), from the run's spans.json; None without one."""
    try:
        spans = SpansFile.model_validate_json((folder / "spans.json").read_bytes())
    except (OSError, ValueError):
        return None
    drawn = by_turn({turn.index: turn.agent.latency_ms for turn in result.turns}, spans)
    return {index: turn.model_dump(mode="json") for index, turn in drawn.items()} or None


def trace_ids_of(result: RunResult) -> list[str] | None:
    ids = [turn.agent.trace_id for turn in result.turns if turn.agent.trace_id]
    return ids or None
