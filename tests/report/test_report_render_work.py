"""The HTML report's work per test (issue 28's thirteenth pass, docs/performance.md): counted, and its shortcuts
held to the general paths they skip, byte for byte, on real runs against a local agent."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import run_tamesu
from report_fixtures import ReportAgent, only_run_dir, report_suite
from tamesu.net.serve import ThreadServer
from tamesu.report import _artifacts, _html_text, _html_turns, html
from tamesu.report.load import LoadedRun, load_run

# one worker for the module: its tests share `runs` (two `tamesu run`s, 5.4 s of a CI run's worker at its first
# test), and spread over the workers each worker that got one of them made both runs again (11.1 s in all)
pytestmark = pytest.mark.xdist_group("render-work")

TURNS = 5
MAX_CALLS_PER_TEST = 800
"""A scripted test of five turns, each answered with a tool call: 720 calls of the report's (reading its
result.json back included) after the thirteenth pass, 1,217 before it."""


@dataclass
class Runs:
    scripted: Path
    """30 tests of five turns each."""
    shop: Path
    """Every status, a judge's evidence, cases, repeats, an agent's hostile words."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    folder = tmp_path_factory.mktemp("render-work")
    server = ThreadServer(ReportAgent().app()).start()
    try:
        report_suite(folder, server.url)
        steps = [{"say": f"step {n}"} for n in range(1, TURNS + 1)]
        suite = {"targets": {"bot": {"type": "rest", "url": f"{server.url}/chat",
                                     "response": {"text": "$.text", "tool_calls": "$.tool_calls"}}},
                 "tests": [{"name": f"c{index}", "target": "bot", "scenario": {"script": steps},
                            "assert": [{"contains": "echo"}]} for index in range(30)]}
        (folder / "scripted.yaml").write_text(json.dumps(suite), encoding="utf-8")
        done = run_tamesu(["run", "scripted.yaml", "--out", "scripted", "--report", "json"], cwd=folder)
        assert done.returncode == 0, done.stdout + done.stderr
        shop = run_tamesu(["run", "shop.yaml", "--out", "shop", "--report", "json"], cwd=folder)
        assert shop.returncode == 3, shop.stdout + shop.stderr  # its unreachable agent
        yield Runs(only_run_dir(folder / "scripted"), only_run_dir(folder / "shop"))
    finally:
        server.stop()


def _first(run_dir: Path, tests: int) -> LoadedRun:
    """The run as if it held its first `tests` tests only."""
    run = load_run(run_dir)
    run.results = run.results[:tests]
    kept = {result.id for result in run.results}
    assert run.plan is not None
    run.plan.tests = [entry for entry in run.plan.tests if entry.id in kept]
    return run


def _calls(run: LoadedRun) -> int:
    """Every call rendering the page makes, Python's and builtins' (what cProfile counts)."""
    made = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal made
        if event in ("call", "c_call"):
            made += 1

    sys.setprofile(count)
    try:
        html.render_html(run, run.dir)
    finally:
        sys.setprofile(None)
    return made


def test_a_test_costs_the_report_a_bounded_number_of_calls(runs: Runs) -> None:
    html.render_html(load_run(runs.scripted), runs.scripted)  # the page's assets read once, as in a run
    small, large = _calls(_first(runs.scripted, 10)), _calls(_first(runs.scripted, 30))
    per_test = (large - small) / 20
    assert per_test <= MAX_CALLS_PER_TEST, per_test


@pytest.mark.parametrize("which", ["scripted", "shop"])
@pytest.mark.parametrize("from_parent", [False, True])
def test_the_reports_shortcuts_write_what_the_general_paths_write(runs: Runs, which: str, from_parent: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir: Path = getattr(runs, which)
    base = run_dir.parent if from_parent else run_dir
    quick = html.render_html(load_run(run_dir), base)

    listed = _artifacts.other_files

    class Everything(set[str]):
        def __contains__(self, name: object) -> bool:
            return True

    def listed_all(folder: Path) -> _artifacts.RunFiles:
        files = listed(folder)
        files.top = Everything()  # audio.wav and spans.json looked for on disk, whatever the listing says
        return files

    with monkeypatch.context() as general:
        general.setattr(html._Page, "_below", lambda self, path: None)  # every link made through pathlib
        general.setattr(html, "other_files", listed_all)
        for module in (_html_turns, _html_text):  # everything escaped
            general.setattr(module, "SPECIAL", re.compile(""))
        slow = html.render_html(load_run(run_dir), base)
    assert quick == slow
    assert quick.count('<section class="run">') >= (30 if which == "scripted" else 8)
