"""`tamesu view`'s metric trends leave out a run that errored, as `--baseline` does (`report.load.mean_metrics`):
it graded nothing, and its `turns: 0` drew the agent's conversations as a dip to none, where every run the agent
answered had one turn. Real runs against a local agent, then against a closed port, then the agent again."""

from __future__ import annotations

import html

import pytest

from ports import refused_port
from view.conftest import Stored

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")


def test_a_run_that_errored_is_no_point_of_a_metrics_trend(stored: Stored) -> None:
    stored.write("""\
targets:
  bot: { type: rest, url: '{{env.BOT_URL}}/chat', connect: { attempts: 1 } }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] }, assert: [ { contains: echo } ] }
""")
    for url, code in ((stored.agent, 0), (f"http://127.0.0.1:{refused_port()}", 3), (stored.agent, 0)):
        done = stored.run({"BOT_URL": url})
        assert done.returncode == code, done.stdout + done.stderr
    page = html.unescape(stored.page("/test", id="suite/t"))
    assert "<code>turns</code> is constant: 1 in all 2 runs" in page, page
    assert "turns over" not in page, page
