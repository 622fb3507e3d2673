"""Traps a new user fell into: project targets in suites, unknown options, plurals, the progress count."""

from __future__ import annotations

import contextlib
import io
import re
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from tamesu.report.console import ConsoleReporter
from tamesu.results.records import TestResult
from tamesu.suite.secrets import Redactor


def test_targets_of_tamesu_yaml_serve_every_suite(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n'
        "targets:\n  bot: { type: model, model: target }\n")
    (tmp_path / "s.tamesu.yaml").write_text(
        "tests:\n  - name: order\n    target: bot\n    scenario: { script: [{ say: hi }] }\n"
        "    assert: [{ contains: shipped }]\n")
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "ok: 1 test in 1 suite"  # and plurals right
    done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tamesu running 1 test from 1 suite" in done.stdout and "1 passed, 0 failed" in done.stdout
    # a suite's own target of the same name wins over the project's
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n" +
        (tmp_path / "s.tamesu.yaml").read_text())
    assert tamesu(["run", "--out", "out"], cwd=tmp_path).returncode == 3  # nothing listens there


def test_an_unknown_option_gets_a_suggestion(tmp_path: Path, tamesu: Any) -> None:
    done = tamesu(["run", "--paralel", "2"], cwd=tmp_path)
    assert done.returncode == 2 and "No such option '--paralel'. Did you mean '--parallel'?" in done.stderr
    done = tamesu(["test", "--dryrun", "-i", "hi"], cwd=tmp_path)
    assert done.returncode == 2 and "Did you mean '--dry-run'?" in done.stderr


def test_the_live_console_counts_done_over_total() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    reporter = ConsoleReporter(console, Redactor())
    suite = SimpleNamespace(name="s")
    tests = [SimpleNamespace(id=f"s/t{n}", suite=suite) for n in range(3)]
    reporter.start(None, tests, Path("."))
    try:
        reporter.run_started(tests[0], 1, 1)
        reporter.test_finished(TestResult(suite="s", test="t0", id="s/t0", target="bot", status="error",
                                          pass_threshold=1.0), [])
        shown = "".join(line.plain for line in reporter._render_running().renderables)
    finally:
        if reporter._live is not None:
            reporter._live.stop()
    assert "1/3 done" in shown


def test_the_html_report_is_written_by_default_and_its_path_ends_the_run(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n'
        "targets:\n  bot: { type: model, model: target }\n")
    (tmp_path / "s.tamesu.yaml").write_text(
        "tests:\n  - name: order\n    target: bot\n    scenario: { script: [{ say: hi }] }\n")
    done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    [run] = list((tmp_path / "out").iterdir())
    assert done.stdout.strip().splitlines()[-1] == f"html report: out/{run.name}/report.html"
    assert "<html" in (run / "report.html").read_text()[:500].lower()
    (tmp_path / "tamesu.yaml").write_text((tmp_path / "tamesu.yaml").read_text() + "report: []\n")
    done = tamesu(["run", "--out", "off"], cwd=tmp_path)
    [run] = list((tmp_path / "off").iterdir())
    assert not (run / "report.html").exists() and "html report" not in done.stdout


def test_after_init_the_first_run_passes_with_nothing_else_running(tmp_path: Path, tamesu: Any) -> None:
    assert tamesu(["init"], cwd=tmp_path).returncode == 0
    # before: the sample agent listened on 8790, as the grpc and orchestrator examples do: with one of them
    # running, the first run failed in before_all "Address already in use". Now init writes a port that was free,
    # one per project (two runs of this test at once no longer share one agent, one's after_all stopping it)
    first = tmp_path / "suites" / "first.yaml"
    ports = re.findall(r"(?:--port |127\.0\.0\.1:)(\d+)", first.read_text())
    assert len(ports) == 2 and len(set(ports)) == 1 and ports[0] != "8790", ports  # the hook's, the url's
    with socket.socket() as example:
        with contextlib.suppress(OSError):  # another program has it already: as taken
            example.bind(("127.0.0.1", 8790))
            example.listen()
        done = tamesu(["run"], cwd=tmp_path, env={"TAMESU_OWNERS": "init-test"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  first/greets and answers" in done.stdout
    # its connect retries while the sample agent starts are what connect.attempts is for: nothing to say of them
    assert "along the way" not in done.stdout, done.stdout
    # the sample agent was stopped (by after_all, else by the watchdog)
    from runtime.test_kills import _wait_gone
    assert not _wait_gone("init-test")


def test_inits_sample_suite_refuses_to_test_another_server_on_its_port(tmp_path: Path, tamesu: Any) -> None:
    # before: the sample agent could not listen (the port taken), the hook said nothing, and the suite passed
    # against whatever answered there; its after_all then killed the pid left in .agent.pid by an earlier run
    assert tamesu(["init"], cwd=tmp_path).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        first = tmp_path / "suites" / "first.yaml"
        written = re.search(r"--port (\d+)", first.read_text())
        assert written is not None
        first.write_text(first.read_text().replace(written.group(1), str(port)))
        (tmp_path / "suites" / ".agent.pid").write_text("999999")  # an earlier run's
        done = tamesu(["run"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"agent.py: cannot listen on 127.0.0.1:{port}: Address already in use (write a free port in first.yaml, " \
           "in the before_all hook and the target's url)" in done.stdout, done.stdout
    assert "PASS" not in done.stdout
    # after_all runs after a failing before_all: the earlier run's pid is forgotten, nothing stopped, no warning
    assert not (tmp_path / "suites" / ".agent.pid").exists()
    assert "after_all" not in done.stdout + done.stderr, done.stdout + done.stderr
