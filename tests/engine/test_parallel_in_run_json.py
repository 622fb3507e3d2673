"""run.json says how many runs could go at once (`parallel`): before, a default a user never wrote (1, or
tamesu.yaml's `parallel`) was recorded nowhere, and two runs' latencies compared without it. A merge keeps the
shards' value when they share it, else none."""

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
  - { name: one, target: bot, scenario: { script: [ { say: "where is my order?" } ] } }
  - { name: two, target: bot, scenario: { script: [ { say: "and again?" } ] } }
"""


def _parallel(folder: Path) -> object:
    [run_dir] = list(folder.iterdir())
    return json.loads((run_dir / "run.json").read_text())["parallel"]


def test_run_json_records_the_parallel_the_run_used(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    runs = {"default": [], "given": ["--parallel", "3"]}
    for name, more in runs.items():
        done = tamesu(["run", "s.tamesu.yaml", "--out", name, *more], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (_parallel(tmp_path / "default"), _parallel(tmp_path / "given")) == (1, 3)
    (tmp_path / "tamesu.yaml").write_text("suites: []\nparallel: 2\n")
    for k, more in ((1, []), (2, []), (3, ["--parallel", "4"])):
        shard = tamesu(["run", "s.tamesu.yaml", "--shard", f"{k}/3", "--out", f"shard-{k}", *more], cwd=tmp_path)
        assert shard.returncode == 0, shard.stdout + shard.stderr
    assert [_parallel(tmp_path / f"shard-{k}") for k in (1, 2, 3)] == [2, 2, 4]
    for name, shards in (("same", ["shard-1", "shard-2"]), ("mixed", ["shard-1", "shard-3"])):
        merged = tamesu(["merge", *shards, "--out", name], cwd=tmp_path)
        assert merged.returncode in (0, 3), merged.stdout + merged.stderr  # a shard left out is said, exit 3
    assert (_parallel(tmp_path / "same"), _parallel(tmp_path / "mixed")) == (2, None)
