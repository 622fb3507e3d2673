"""`tamesu view`'s runs table says a run's errors apart from its failures, as the run's own last line does
(`0 passed, 1 failed, 1 error`): a run whose agent could not be reached read `failed 2`, the agent blamed for
what the environment did. A real run against a local agent and a closed port fills the store; the page is read
over HTTP from the view the command serves."""

from __future__ import annotations

import re

import pytest

from ports import refused_port
from view.conftest import Stored

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")


SPOILING = """\
suites: ['suite.yaml']
cache: { mode: off }
models:
  simulator: { provider: fake, rules: [ { say: "As an AI language model, I can't book flights" } ] }
"""
"""A project whose simulated user breaks character on every run (tests/engine/test_repeat_verdicts.py)."""


def _newest_run(page: str) -> dict[str, str]:
    """The runs table's first row, by its header's names."""
    header = [re.sub("<[^>]+>", "", cell) for cell in re.findall(r"<th>(.*?)</th>", page)]
    first = re.search(r"<tbody><tr>(.*?)</tr>", page)
    assert first is not None, page
    cells = [re.sub("<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", first.group(1))]
    return dict(zip(header, cells, strict=True))


def test_the_runs_table_counts_errors_apart_from_failures(stored: Stored) -> None:
    stored.write(f"""\
targets:
  bot: {{ type: rest, url: '{stored.agent}/chat' }}
  gone: {{ type: rest, url: 'http://127.0.0.1:{refused_port()}/chat', connect: {{ attempts: 1 }} }}
tests:
  - {{ name: fails, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: nope }} ] }}
  - {{ name: passes, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: echo }} ] }}
  - {{ name: unreachable, target: gone, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    done = stored.run()
    assert done.returncode == 3 and "1 passed, 1 failed, 1 error" in done.stdout, done.stdout + done.stderr
    said = _newest_run(stored.page())
    assert [said[key] for key in ("tests", "passed", "failed", "errors")] == ["3", "passed 1", "failed 1", "error 1"]
    assert said["pass rate"].startswith("33%"), said


def test_a_quarantined_failure_has_its_column_beside_the_rate_it_counts_in(stored: Stored) -> None:
    # before: `passed 1, failed 1, error 0, 33%`: the quarantined failure was in the rate but in no column
    stored.write(f"""\
targets:
  bot: {{ type: rest, url: '{stored.agent}/chat' }}
tests:
  - {{ name: fails, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: nope }} ] }}
  - {{ name: passes, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: echo }} ] }}
  - name: parked
    target: bot
    quarantine: {{ reason: SUP-412 flaky }}
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert: [ {{ contains: nope }} ]
""")
    done = stored.run()
    assert done.returncode == 1 and "1 passed, 1 failed, 1 quarantined" in done.stdout, done.stdout + done.stderr
    said = _newest_run(stored.page())
    assert [said[key] for key in ("tests", "passed", "failed", "errors", "quarantined")] == \
        ["3", "passed 1", "failed 1", "error 0", "quarantined 1"], said
    assert "inconclusive" not in said  # a column only when a run has one
    # the passed share of the tests that ran: a quarantined failure leaves the exit code alone, not the rate (what
    # quarantine hides stays visible)
    assert said["pass rate"].startswith("33%"), said


def test_an_inconclusive_test_has_its_column_when_a_run_has_one(stored: Stored) -> None:
    # the simulated user breaks character (engine.fault's audit): the failed check says nothing of the agent
    stored.write(f"""\
targets:
  bot: {{ type: rest, url: '{stored.agent}/chat' }}
tests:
  - {{ name: passes, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: echo }} ] }}
  - name: spoiled
    target: bot
    retries_inconclusive: 0
    scenario: {{ goal: "Book a flight to Paris", max_turns: 2 }}
    assert: [ {{ contains: booked }} ]
""", SPOILING)
    done = stored.run()
    assert "1 passed" in done.stdout and "1 inconclusive" in done.stdout, done.stdout + done.stderr
    said = _newest_run(stored.page())
    assert [said[key] for key in ("tests", "passed", "failed", "errors", "quarantined", "inconclusive")] == \
        ["2", "passed 1", "failed 0", "error 0", "quarantined 0", "inconclusive 1"], said
