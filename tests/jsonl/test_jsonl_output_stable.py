"""`tamesu test` on the repository's JSONL files (the expense example's and the design fixtures') against the real
example agent, a local desk agent and fake models: its exit code, console and every file it writes compared byte for
byte with golden files recorded from the code before the JSONL package was split (issue 27). Only what truly varies
between two runs is normalised: timings, timestamps, run ids, trace ids, ports, paths, the commit.

Record again (after a change that is meant to change the output): TAMESU_RECORD_GOLDEN=1 pytest this file."""

from __future__ import annotations

import difflib
import itertools
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
import tamesu
from agents.expense_agent import EXAMPLE, ROOT, ExpenseAgent, expense_agent
from tamesu.net.serve import ThreadServer

__all__ = ["expense_agent"]

GOLDEN = Path(__file__).parents[1] / "fixtures" / "jsonl_golden"
DESIGN = Path(__file__).parents[1] / "fixtures" / "design"
RECORD = os.environ.get("TAMESU_RECORD_GOLDEN") == "1"


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    cwd: Path = EXAMPLE
    stdin: str | None = None
    command: str = "test"
    env: tuple[tuple[str, str], ...] = ()


CASES = [
    Case("standard", ("-i", "tests/standard.jsonl", "-n", "expense", "-o", "{tmp}/records.jsonl")),
    Case("history", ("-i", "tests/history.jsonl", "-n", "expense", "-v")),
    Case("multi-turn", ("-i", "tests/multi-turn.jsonl", "-n", "expense", "-o", "{tmp}/records.jsonl")),
    Case("multi-turn-fail", ("-i", "tests/multi-turn.jsonl", "-n", "expense", "--on-missing-input", "fail",
                             "-o", "{tmp}/records.jsonl")),
    Case("multi-turn-end", ("-i", "tests/multi-turn.jsonl", "-n", "expense", "--on-missing-input", "end", "-v")),
    Case("multi-turn-human", ("-i", "tests/multi-turn.jsonl", "-n", "expense", "--interactive",
                              "-o", "{tmp}/records.jsonl"), stdin="PO-12345\n"),
    Case("dynamic", ("-i", "tests/dynamic.jsonl", "-n", "expense", "-o", "{tmp}/records.jsonl")),
    Case("standard-model-target", ("-i", "tests/standard.jsonl", "-n", "expense-model")),
    Case("message", ("-i", "What is the expense policy?", "-n", "expense", "-v")),
    Case("generated-dry-run", ("-i", "agents:generator?count=2&focus=edge-cases", "-n", "expense", "--dry-run",
                               "-o", "{tmp}/generated.jsonl")),
    Case("generated-script", ("-i", "scripts:scripts.generate:cases?scenario=approval-flow", "-n", "expense")),
    Case("folder", ("-i", "tests", "-n", "expense")),
    Case("unreachable", ("-i", "tests/history.jsonl", "-n", "expense"), env=(("EXPENSE_URL", "http://127.0.0.1:1"),)),
    Case("unknown-target", ("-i", "tests/history.jsonl", "-n", "nobody")),
    Case("design-single-turn", ("-i", "tests/single-turn.jsonl", "-n", "assistants.expense",
                                "-o", "{tmp}/records.jsonl"), cwd=DESIGN),
    Case("design-validators", ("-i", "tests/validators.jsonl", "-n", "assistants.expense",
                               "-o", "{tmp}/records.jsonl"), cwd=DESIGN),
    Case("design-receipt", ("-i", "tests/receipt.jsonl", "-n", "desk", "-o", "{tmp}/records.jsonl"), cwd=DESIGN),
    Case("design-receipt-refused", ("-i", "tests/receipt.jsonl", "-n", "desk-text"), cwd=DESIGN),
    Case("validate-example", ("tests",), command="validate"),
    Case("validate-design", ("tests",), cwd=DESIGN, command="validate"),
]


def _desk() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"text": f"Got {len(body.get('files') or body.get('attachments') or [])} file(s); "
                                     "the amount is noted."})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


@pytest.fixture(scope="module")
def env(expense_agent: ExpenseAgent) -> Iterator[dict[str, str]]:
    desk = ThreadServer(_desk()).start()
    try:
        yield {**expense_agent.env, "DESK_URL": desk.url, "HELPER_URL": desk.url}
    finally:
        desk.stop()


def _run(case: Case, env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    args = [a.replace("{tmp}", str(tmp)) for a in case.args]
    if case.command == "test":
        args += ["--out", str(tmp / "out")]
    # the results store (on by default) counts the runs before this one in its closing line: not this test's
    # subject, and it would write into the examples' folders
    # (off over the agent fixtures' own TAMESU_STORE, which keeps their runs' history out of the examples)
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **env, "TAMESU_STORE": "off", **dict(case.env)}
    full_env.pop("TAMESU_DEBUG", None)
    if os.environ.get("TAMESU_TEST_FORK", "1") == "0":
        # a plain child: the tamesu under test, wherever its working folder is (a relative PYTHONPATH would not
        # follow it); a fork has it already, as the zygote imported it beside this test
        full_env["PYTHONPATH"] = str(Path(tamesu.__file__).resolve().parent.parent)
    stdin = case.stdin if case.stdin is not None else subprocess.DEVNULL
    return forked.run([case.command, *args], case.cwd, full_env, 120, stdin)


_TIMING_KEY = r'"[a-z_0-9]*(?:_ms|_ms_p50|_ms_p95|_ms_max|_s|seconds)"'


def normalise(text: str, tmp: Path, ports: list[str]) -> str:
    """What differs between two runs of unchanged code, replaced by a placeholder; the rest kept as written."""
    text = text.replace(str(tmp), "<TMP>").replace(str(ROOT), "<ROOT>")
    for port in ports:
        text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:<PORT>")
    text = re.sub(r"\d{8}-\d{6}-\d{3}-[0-9a-f]+", "<RUN>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?", "<TIME>", text)
    text = re.sub(rf"({_TIMING_KEY}:\s*)-?[\d.]+(?:e-?\d+)?", r"\1<N>", text)
    text = re.sub(r'("(?:trace_id|span_id|parent_span_id|commit|branch|traceparent)":\s*)"[^"]*"', r'\1"<ID>"', text)
    # the checkout's, not the run's: a detached HEAD (CI checking out a commit) has no branch
    text = re.sub(r'("branch":\s*)null', r'\1"<ID>"', text)
    text = re.sub(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<UUID>", text)
    text = re.sub(r"\(\d+\.\ds\)", "(<S>)", text)
    text = re.sub(r"(Total time: )[\d.]+s", r"\1<S>", text)
    text = re.sub(r"\b\d+\.\d+ ?(ms|s)\b", r"<N>\1", text)
    return text


def _snapshot(case: Case, done: subprocess.CompletedProcess[str], tmp: Path, ports: list[str]) -> str:
    parts = [f"=== exit ===\n{done.returncode}\n", f"=== stdout ===\n{done.stdout}", f"=== stderr ===\n{done.stderr}"]
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        name = normalise(str(path.relative_to(tmp)), tmp, ports)
        if path.suffix == ".html":  # the report page: its embedded data is the result files compared here
            parts.append(f"=== file {name} ===\n(html report, {path.name})\n")
            continue
        parts.append(f"=== file {name} ===\n{path.read_text()}")
    return normalise("\n".join(parts), tmp, ports)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_tamesu_output_is_unchanged(case: Case, env: dict[str, str], tmp_path: Path) -> None:
    done = _run(case, env, tmp_path)
    ports = [m for url in env.values() for m in re.findall(r":(\d+)", url)]
    got = _snapshot(case, done, tmp_path, ports)
    golden = GOLDEN / f"{case.name}.txt"
    if RECORD:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got)
    assert golden.is_file(), f"no golden file {golden}: record it with TAMESU_RECORD_GOLDEN=1"
    want = golden.read_text()
    diff = difflib.unified_diff(want.splitlines(), got.splitlines(), str(golden), "this run", lineterm="", n=1)
    assert got == want, "\n".join(itertools.islice(diff, 60))


def test_the_golden_files_hold_what_the_runs_wrote() -> None:
    """The comparison is not vacuous: every golden run wrote a console and, where asked, its records."""
    standard = (GOLDEN / "standard.txt").read_text()
    assert "  Agent Test" in standard and "=== file records.jsonl ===" in standard
    records = standard.split("=== file records.jsonl ===\n")[1].split("=== file")[0]
    assert [re.findall(r'"id": "([^"]+)"', line)[0] for line in records.splitlines() if line.strip()][:2] == [
        "T001", "expense-turn1"]
