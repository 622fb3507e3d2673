"""The suite's xdist scheduler (tests/lane_scheduling.py): the lanes run on the lane workers only, one lane
each at a time, and a worker beyond them runs the ungrouped tests, in a real nested pytest over three workers."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import forked

TESTS = '''
import json, os, time
import pytest


def _ran(name):
    start = time.time()
    time.sleep(0.3)
    with open(os.environ["LANE_LOG"], "a") as log:
        log.write(json.dumps({"test": name, "worker": os.environ["PYTEST_XDIST_WORKER"], "start": start,
                              "end": time.time()}) + "\\n")


@pytest.mark.parametrize("lane", ["g1", "g2", "g3"])
@pytest.mark.parametrize("n", range(3))
def test_in_a_lane(lane, n):
    _ran(f"{lane}-{n}")


@pytest.mark.parametrize("n", range(8))
def test_ungrouped(n):
    _ran(f"free-{n}")
'''

CONFTEST = '''
import pytest
from lane_scheduling import LaneScheduling


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    for item in items:
        lane = item.callspec.params.get("lane") if hasattr(item, "callspec") else None
        if lane:
            item.add_marker(pytest.mark.xdist_group(lane))


def pytest_xdist_make_scheduler(config, log):
    return LaneScheduling(config, log, lanes=("g1", "g2", "g3"), lane_workers=2)
'''


def test_lanes_run_on_the_lane_workers_one_each_and_the_third_worker_runs_the_rest(tmp_path: Path) -> None:
    (tmp_path / "test_lanes.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    shutil.copy(Path(__file__).with_name("lane_scheduling.py"), tmp_path)
    log = tmp_path / "ran.jsonl"
    done = forked.run(["-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:randomly", "--rootdir",
                       str(tmp_path), "--confcutdir", str(tmp_path), "-c", os.devnull, "-q", "-n", "3", "--dist",
                       "loadgroup", "test_lanes.py"],
                      tmp_path, {**os.environ, "LANE_LOG": str(log), "NO_COLOR": "1"}, 120, module="pytest")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["test"] for r in ran) == sorted([f"g{g}-{n}" for g in (1, 2, 3) for n in range(3)]
                                                    + [f"free-{n}" for n in range(8)])
    lanes = [r for r in ran if not r["test"].startswith("free")]
    assert {r["worker"] for r in lanes} <= {"gw0", "gw1"}, lanes
    for lane in ("g1", "g2", "g3"):  # a lane stays on one worker
        assert len({r["worker"] for r in lanes if r["test"].startswith(lane)}) == 1, lanes
    assert any(r["worker"] == "gw2" for r in ran), ran  # the third worker took part, with ungrouped tests only
    # never more than two lanes at once: at each test's start, the lanes with a test under way
    for r in lanes:
        under_way = {o["test"][:2] for o in lanes if o["start"] <= r["start"] < o["end"]}
        assert len(under_way) <= 2, (r, lanes)


LOOKAHEAD_TESTS = '''
import json, os, time
import pytest

# g1's long test is its second-to-last: its worker is busy with it long after g2's worker is done
SECONDS = {"g1": [0.05, 3.0, 0.05], "g2": [0.3, 0.3, 0.3], "g3": [0.2, 0.2, 0.2]}


@pytest.mark.parametrize("lane", ["g1", "g2", "g3"])
@pytest.mark.parametrize("n", range(3))
def test_in_a_lane(lane, n):
    start = time.time()
    time.sleep(SECONDS[lane][n])
    with open(os.environ["LANE_LOG"], "a") as log:
        log.write(json.dumps({"test": f"{lane}-{n}", "worker": os.environ["PYTEST_XDIST_WORKER"], "start": start,
                              "end": time.time()}) + "\\n")


@pytest.mark.parametrize("n", range(4))
def test_ungrouped(n):
    time.sleep(0.05)
'''


def test_a_lane_goes_to_the_lane_worker_free_first_not_to_one_with_a_long_test_still_to_run(tmp_path: Path) -> None:
    """xdist hands a worker its next unit when two of its tests are left: g1's worker took g3 at its first test's
    end and ran it after its 3 s test, while g2's worker stood free from 0.9 s on. A lane worker is handed its
    next unit with its last test left: g3 goes to g2's worker."""
    (tmp_path / "test_lanes.py").write_text(LOOKAHEAD_TESTS)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    shutil.copy(Path(__file__).with_name("lane_scheduling.py"), tmp_path)
    log = tmp_path / "ran.jsonl"
    done = forked.run(["-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:randomly", "--rootdir",
                       str(tmp_path), "--confcutdir", str(tmp_path), "-c", os.devnull, "-q", "-n", "3", "--dist",
                       "loadgroup", "test_lanes.py"],
                      tmp_path, {**os.environ, "LANE_LOG": str(log), "NO_COLOR": "1"}, 120, module="pytest")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = {r["test"]: r for r in map(json.loads, log.read_text().splitlines())}
    worker = {lane: {r["worker"] for name, r in ran.items() if name.startswith(lane)} for lane in ("g1", "g2", "g3")}
    assert all(len(workers) == 1 for workers in worker.values()), ran
    assert worker["g3"] == worker["g2"] != worker["g1"], ran
    assert max(r["end"] for name, r in ran.items() if name.startswith("g3")) < ran["g1-1"]["end"], ran
