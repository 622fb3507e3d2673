"""`tamesu view`'s test history says a run's fault reason once, as the HTML and JUnit reports do
(`report.words.fault_said_below`): an unreachable agent's error was written, then again as `fault: environment:
<the error>`; a failed check's line, then again after `fault: agent:` above the verdicts. A real run against a
local agent and a closed port."""

from __future__ import annotations

import html

import pytest

from ports import refused_port
from view.conftest import Stored

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")


def test_a_runs_fault_is_said_with_its_reason_once(stored: Stored) -> None:
    stored.write(f"""\
targets:
  bot: {{ type: rest, url: '{stored.agent}/chat' }}
  gone: {{ type: rest, url: 'http://127.0.0.1:{refused_port()}/chat', connect: {{ attempts: 1 }} }}
tests:
  - {{ name: fails, target: bot, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: nope }} ] }}
  - {{ name: unreachable, target: gone, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    done = stored.run()
    assert done.returncode == 3, done.stdout + done.stderr

    def page(test: str) -> str:
        return html.unescape(stored.page("/test", id=f"suite/{test}"))

    gone = page("unreachable")
    assert gone.count("cannot reach") == 1 and "<p>fault: <b>environment</b></p>" in gone, gone
    failed = page("fails")
    assert failed.count('expected the agent to say "nope"') == 1 and "<p>fault: <b>agent</b></p>" in failed, failed
