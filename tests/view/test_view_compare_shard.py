"""`tamesu view`'s Compare of a run that was one shard computes what `--baseline` does: the other shards' tests are
elsewhere, not removed (before, the view listed each of them as a removed test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tamesu.results.sharding import shard_of
from view.conftest import stored_run

NAMES = [f"t{n}" for n in range(8)]


def _run(root: Path, *extra: str) -> str:
    done = stored_run(root, None, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_shard_run_compared_with_a_whole_run_removes_nothing(tmp_path: Path, view: Any) -> None:
    tests = "".join(f"  - {{ name: {name}, scenario: {{ script: [ {{ say: hi }} ] }}, "
                    "assert: [ { contains: hello } ] }\n" for name in NAMES)
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\n"
        "models:\n  bot: { provider: fake, rules: [ { say: hello } ] }\ntests:\n" + tests)
    mine = sorted(f"s/{name}" for name in NAMES if shard_of(f"s/{name}", 2) == 1)
    assert 0 < len(mine) < len(NAMES)  # both shards hold tests
    _run(tmp_path)
    shard = _run(tmp_path, "--shard", "1/2", "--baseline", "out")
    assert "0 new, 0 removed" in shard, shard  # what --baseline says of the same two runs
    served = view(tmp_path)
    page = httpx.get(f"{served.url}/compare", timeout=30).text  # the newest run against the one before
    # metric changes are left out: a loaded machine moves the fake model's millisecond latencies past the tolerance
    assert "0 regressions, 0 fixes, 0 new, 0 removed," in page, page
