"""`--shard K/N` and `tamesu merge`: the example suite split in two and joined again equals one whole run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_tamesu
from example_shop import example_shop
from tamesu.results.sharding import Shard, ShardError, select, shard_of

XSD = Path(__file__).parents[1] / "fixtures" / "junit.xsd"


def test_a_test_keeps_its_shard_whatever_else_is_in_the_suite() -> None:
    # fixed values: a change here would move every user's tests between CI jobs
    assert [shard_of(i, 2) for i in ("suite/a", "suite/b", "suite/c")] == [2, 1, 2]
    assert shard_of("rest-shop/return an order", 5) == 4
    ids = [f"suite/test {n}" for n in range(200)]
    shards = [select([_T(i) for i in ids], Shard(k, 4)) for k in range(1, 5)]
    assert sorted(t.id for shard in shards for t in shard) == sorted(ids)  # each test in exactly one shard
    assert all(30 <= len(shard) <= 70 for shard in shards)
    fewer = select([_T(i) for i in ids[::3]], Shard(2, 4))
    assert {t.id for t in fewer} <= {t.id for t in shards[1]}  # removing tests moves no other test


class _T:
    def __init__(self, test_id: str) -> None:
        self.id = test_id


@pytest.mark.parametrize("text", ["3/2", "0/2", "1/0", "two/3", "2", "1/2/3"])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(ShardError):
        Shard.parse(text)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    with example_shop(tmp_path_factory.mktemp("shop")) as (folder, url):
        yield folder, {"SHOP_URL": url}


def _only(out: Path) -> Path:
    [run_dir] = [d for d in out.iterdir() if d.is_dir()]
    return run_dir


def _results(run_dir: Path) -> dict[str, str]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {json.loads(line)["id"]: json.loads(line)["status"] for line in lines}


def test_two_shards_merged_give_the_totals_of_one_run(shop: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    folder, env = shop
    whole = run_tamesu(["run", str(folder), "--out", str(tmp_path / "whole")], cwd=tmp_path, env=env)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    whole_dir = _only(tmp_path / "whole")
    listed: list[list[str]] = []
    for k in (1, 2):
        shard = run_tamesu(["run", str(folder), "--shard", f"{k}/2", "--out", str(tmp_path / f"shard-{k}")],
                           cwd=tmp_path, env=env)
        assert shard.returncode == 0, shard.stdout + shard.stderr
        names = run_tamesu(["list", str(folder), "--shard", f"{k}/2", "--json"], cwd=tmp_path, env=env)
        listed.append([json.loads(line)["id"] for line in names.stdout.splitlines()])
        assert sorted(_results(_only(tmp_path / f"shard-{k}"))) == sorted(listed[-1])
        assert json.loads((_only(tmp_path / f"shard-{k}") / "plan.json").read_text())["shard"] == f"{k}/2"
    assert listed[0] and listed[1] and not set(listed[0]) & set(listed[1])

    merged = run_tamesu(["merge", str(tmp_path / "shard-1"), str(tmp_path / "shard-2"), "--out",
                         str(tmp_path / "merged"), "--report", "junit"], cwd=tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    merged_dir = _only(tmp_path / "merged")
    one = json.loads((whole_dir / "run.json").read_text())
    joined = json.loads((merged_dir / "run.json").read_text())
    assert joined["counts"] == one["counts"] and joined["exit_code"] == one["exit_code"] == 0
    # the model spend of the shards, added up (the shop's fake models: the whole run's calls, split in two)
    parts = [json.loads((_only(tmp_path / f"shard-{k}") / "run.json").read_text())["models"] for k in (1, 2)]
    spent = [part for part in parts if part]  # a shard whose tests call no model has none
    assert spent and joined["models"] == {key: sum(part[key] for part in spent) for key in spent[0]}
    assert joined["models"]["calls"] == joined["models"]["fake_calls"] == one["models"]["calls"] > 0
    assert _results(merged_dir) == _results(whole_dir)
    plan = json.loads((merged_dir / "plan.json").read_text())
    assert plan["shards"] == ["1/2", "2/2"] and len(plan["tests"]) == one["counts"]["total"]
    # the merged directory stands alone: every run's artifacts were copied in
    for line in (merged_dir / "results.jsonl").read_text().splitlines():
        for run in json.loads(line)["runs"]:
            assert (merged_dir / run["dir"] / "result.json").is_file(), run["dir"]
    import xmlschema  # here, not at collection: 0.13 s of CPU in every xdist worker

    xmlschema.XMLSchema(XSD).validate(str(merged_dir / "junit.xml"))
    assert f"{one['counts']['passed']} passed, 0 failed" in merged.stdout

    # one run named twice is said so (it read as every test in two runs, "in X and X"); shards never overlap
    twice = run_tamesu(["merge", str(tmp_path / "shard-1"), str(tmp_path / "shard-1")], cwd=tmp_path)
    assert twice.returncode == 2 and twice.stderr.strip() == f"{_only(tmp_path / 'shard-1')}: given twice", twice.stderr
    overlap = run_tamesu(["merge", str(tmp_path / "whole"), str(tmp_path / "shard-1")], cwd=tmp_path)
    assert overlap.returncode == 2 and "the same test is in two runs" in overlap.stderr, overlap.stderr

    # a shard whose job died before it kept its folder: before, "1 passed, 0 failed", exit 0, a green merge job
    alone = run_tamesu(["merge", str(tmp_path / "shard-1"), "--out", str(tmp_path / "alone")], cwd=tmp_path)
    assert alone.returncode == 3, alone.stdout + alone.stderr
    assert ("shard 2/2 missing: none of its tests is in the merged run (did its job end before it kept its run "
            "folder?)") in alone.stderr
    assert json.loads((_only(tmp_path / "alone") / "run.json").read_text())["exit_code"] == 3


def test_an_empty_shard_is_an_empty_passing_run(tmp_path: Path, tamesu) -> None:
    suite = tmp_path / "one.yaml"
    suite.write_text("targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n"
                     "tests:\n  - name: only\n    target: bot\n    scenario: { script: [ { say: hi } ] }\n")
    empty = 1 if shard_of("one/only", 2) == 2 else 2
    result = tamesu(["run", "one.yaml", "--shard", f"{empty}/2", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((_only(tmp_path / "out") / "run.json").read_text())["counts"]["total"] == 0
    bad = tamesu(["run", "one.yaml", "--shard", "3/2"], cwd=tmp_path)
    assert bad.returncode == 2 and "1 <= K <= N" in bad.stderr


@pytest.mark.parametrize("command", [["merge"], ["store", "import", "--store", "sqlite:///store.db"]])
def test_a_folder_that_is_no_run_and_holds_none_is_one_line(command: list[str], tmp_path: Path, tamesu) -> None:
    (tmp_path / "empty" / "nothing-here").mkdir(parents=True)
    done = tamesu([*command, "empty"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == "empty: not a run directory and holds none"


def test_shards_of_different_splits_are_refused(shop: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """2/3 beside 2/4 and 3/4: before, "5 passed, 0 failed", exit 0, though 3 of the shop's 8 tests were in none."""
    folder, env = shop
    listed = run_tamesu(["list", str(folder), "--json"], cwd=tmp_path, env=env)
    ids = [json.loads(line)["id"] for line in listed.stdout.splitlines()]
    shards = [Shard(2, 3), Shard(2, 4), Shard(3, 4)]
    chosen = [[i for i in ids if shard_of(i, s.total) == s.index] for s in shards]
    covered = {i for part in chosen for i in part}
    # the case the refusal is for: no test in two of them (that was already refused), some in none
    assert sum(map(len, chosen)) == len(covered) and covered < set(ids), chosen
    outs = [tmp_path / f"shard-{s.index}-of-{s.total}" for s in shards]
    for shard, out in zip(shards, outs, strict=True):
        done = run_tamesu(["run", str(folder), "--shard", str(shard), "--out", str(out)], cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    merged = run_tamesu(["merge", *map(str, outs), "--out", str(tmp_path / "merged")], cwd=tmp_path)
    assert merged.returncode == 2, merged.stdout + merged.stderr
    line = merged.stderr.strip()
    assert line.startswith("shards of different splits: 2/3 (") and "2/4 (" in line and "3/4 (" in line, line
    assert "\n" not in line and "merge the K/N shards of one N" in line
    assert not (tmp_path / "merged").exists()


def test_shards_of_different_commits_are_refused(shop: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Before: joined, exit 0, the merged run filed under the first shard's commit, its verdicts of code it never
    tested. Changes on top of one commit (a checkout's untracked files count by time of change) only warn."""
    folder, env = shop
    for name, shard, commit in (("one", "1/2", "c0ffee1"), ("two", "2/2", "beef222"), ("same", "2/2", "c0ffee1+a1b2")):
        done = run_tamesu(["run", str(folder), "--shard", shard, "--out", str(tmp_path / name)], cwd=tmp_path,
                          env={**env, "TAMESU_COMMIT": commit})
        assert done.returncode == 0, done.stdout + done.stderr
    one, two, same = (_only(tmp_path / name) for name in ("one", "two", "same"))
    refused = run_tamesu(["merge", str(tmp_path / "one"), str(tmp_path / "two"), "--out", str(tmp_path / "m")],
                         cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip() == (f"runs of different commits: c0ffee1 ({one}); beef222 ({two}): shards of one "
                                      "run test one commit; merge the shards of one commit"), refused.stderr
    assert not (tmp_path / "m").exists()
    joined = run_tamesu(["merge", str(tmp_path / "one"), str(tmp_path / "same"), "--out", str(tmp_path / "m")],
                        cwd=tmp_path)
    assert joined.returncode == 0, joined.stdout + joined.stderr
    warning = (f"the runs tested different changes on top of one commit: c0ffee1 ({one}); c0ffee1+a1b2 ({same})")
    assert f"warning: {warning}" in joined.stderr, joined.stderr
    assert warning in json.loads((_only(tmp_path / "m") / "run.json").read_text())["warnings"]


def test_one_shard_in_two_runs_is_refused(tmp_path: Path, serve) -> None:
    """A shard's job ran again into the same folder, its first try stopped before any test finished: before, the
    merge exited 143 (the first try's SIGTERM) over the second's whole, passing results."""
    import asyncio
    import signal
    import subprocess
    import sys
    import threading

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from lifeline import tied

    asked, release = threading.Event(), threading.Event()

    async def chat(request: Request) -> JSONResponse:
        asked.set()
        while not release.is_set():  # the first try's turn: held until that try is stopped
            await asyncio.sleep(0.01)
        return JSONResponse({"text": "hello"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "one.yaml").write_text(f"targets:\n  bot: {{ type: rest, url: '{url}/chat' }}\ntests:\n"
                                       "  - name: only\n    target: bot\n    scenario: { script: [ { say: hi } ] }\n")
    command = [sys.executable, "-m", "tamesu", "run", "one.yaml", "--shard", "1/1", "--out", "shards", "--color",
               "never"]
    first = subprocess.Popen(tied(command), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert asked.wait(60), "the first try never spoke to the agent"
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
    finally:
        release.set()
        if first.poll() is None:
            first.kill()
    assert first.returncode == 143, out + err
    again = run_tamesu(command[3:], cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    tries = sorted(p for p in (tmp_path / "shards").iterdir() if p.is_dir())
    unfinished = tries[0] / "results.jsonl"
    assert len(tries) == 2 and (not unfinished.exists() or not unfinished.read_text().strip())
    merged = run_tamesu(["merge", "shards", "--out", "merged"], cwd=tmp_path)
    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert merged.stderr.strip() == (f"shard 1/1 is in two runs: {Path('shards') / tries[0].name} and "
                                     f"{Path('shards') / tries[1].name} (its job ran again? merge one of them)")


def test_shards_of_different_selections_are_refused(shop: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """One shard's job with `--tags orders`, the other's without: before, merged, exit 0, the tests of shard 2/2's
    share that are not tagged `orders` in no shard and nothing said."""
    folder, env = shop
    listed = run_tamesu(["list", str(folder), "--json"], cwd=tmp_path, env=env)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert any(shard_of(r["id"], 2) == 2 and "orders" not in r["tags"] for r in rows), rows  # what goes missing
    for name, extra in (("one", ["--shard", "1/2"]), ("two", ["--shard", "2/2", "--tags", "orders"]),
                        ("all", ["--shard", "2/2"])):
        done = run_tamesu(["run", str(folder), *extra, "--out", str(tmp_path / name)], cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    one, two = _only(tmp_path / "one"), _only(tmp_path / "two")
    chosen = sum(1 for r in rows if "orders" in r["tags"])
    refused = run_tamesu(["merge", str(tmp_path / "one"), str(tmp_path / "two"), "--out", str(tmp_path / "m")],
                         cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = refused.stderr.strip()
    assert line.startswith(f"shards of different selections of tests: 1/2 ({one}) chose {len(rows)} tests ("), line
    assert f"; 2/2 ({two}) chose {chosen} tests (" in line, line
    assert line.endswith("every shard's job must choose the same tests (suites, --filter, --tags) for --shard to "
                         "split them"), line
    joined = run_tamesu(["merge", str(tmp_path / "one"), str(tmp_path / "all"), "--out", str(tmp_path / "m")],
                        cwd=tmp_path)
    assert joined.returncode == 0, joined.stdout + joined.stderr
