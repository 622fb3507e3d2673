"""The plan's own warnings (an expired quarantine `until`) are in run.json's `warnings`, beside the run's: before,
they were on the console alone, and a CI job reading run.json never saw them. A merge of shards says each once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_SUITE = """\
models:
  bot: { provider: fake, rules: [ { say: "Your order ORD-1001 is on its way" } ] }
targets:
  bot: { type: model, model: bot }
tests:
  - name: order
    target: bot
    quarantine: { reason: flaky carrier, until: 2020-01-01 }
    scenario: { script: [ { say: "where is my order?" } ] }
    assert: [ { contains: "ORD" } ]
  - name: again
    target: bot
    scenario: { script: [ { say: "and again?" } ] }
"""

_EXPIRED = "s.tamesu.yaml:8:49: tests[0].quarantine.until: quarantine expired on 2020-01-01; the test counts again"


def _warnings(folder: Path) -> list[str]:
    [run_dir] = list(folder.iterdir())
    return list(json.loads((run_dir / "run.json").read_text())["warnings"])


def test_the_plans_warnings_are_in_run_json(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"warning: {_EXPIRED}" in done.stdout + done.stderr
    assert _warnings(tmp_path / "out") == [_EXPIRED]
    for k in (1, 2):
        shard = tamesu(["run", "s.tamesu.yaml", "--shard", f"{k}/2", "--out", f"shard-{k}"], cwd=tmp_path)
        assert shard.returncode == 0, shard.stdout + shard.stderr
        assert _warnings(tmp_path / f"shard-{k}") == [_EXPIRED]
    merged = tamesu(["merge", "shard-1", "shard-2", "--out", "merged"], cwd=tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert _warnings(tmp_path / "merged") == [_EXPIRED]
