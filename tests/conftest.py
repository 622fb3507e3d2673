"""Shared fixtures: the tamesu command run as a user runs it, and local servers on free ports."""

from __future__ import annotations

import contextlib
import importlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import forked
import sdk_groups
import source_tree
import speech_keeper
from lane_scheduling import LaneScheduling
from tamesu.net.serve import ThreadServer

ROOT = Path(__file__).resolve().parent.parent


def _keep_bytecode() -> None:
    """Compiled modules kept between processes, out of the source tree, when the environment says to write none.

    With PYTHONDONTWRITEBYTECODE (set on the container the suite is timed on) every process compiles every module
    it imports from source: each xdist worker spent some 5 s of CPU rewriting and compiling the test modules, and
    every `python` child, agent and zygote compiled tamesu again. The bytecode goes under .pytest_cache instead of
    beside the sources, so the tree stays as clean as the variable meant; children inherit it through the
    environment (before the first zygote reads it, so forks and plain runs still see one environment)."""
    if not sys.dont_write_bytecode or os.environ.get("TAMESU_TEST_BYTECODE") == "0":
        return
    prefix = str(ROOT / ".pytest_cache" / "pycache")
    # what earlier runs compiled in their temporary folders (plug-ins, hooks) is never read again
    shutil.rmtree(prefix + os.path.realpath(tempfile.gettempdir()), ignore_errors=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_keep_bytecode()

MARK_BY_FIXTURE = {"realtime_agent": "audio", "realtime_clock": "audio", "voice_bot_url": "audio",
                   "voice_bot_clock": "audio", "shared_chromium": "browser", "web_shop_url": "browser",
                   "postgres": "db"}
"""A test that uses one of these session fixtures needs what the mark says, whether or not its module says so."""
GROUPS = ("audio", "browser", "db")
"""Under `--dist loadgroup` each of these marks is an xdist group, run by one worker: Chromium and PostgreSQL
start once per run instead of once per worker. A test with two of these marks joins the first group. A test
that starts a Chromium of its own is in a group outside the lanes (browser_fixtures.OWN_CHROMIUM)."""
AUDIO_LANE_BY_FIXTURE = {"voice_bot_url": "audio-bot", "voice_bot_clock": "audio-lines"}
"""The audio tests are split in lanes, each one xdist group: a lane's real-time tests never run beside each
other, and a lane's agent (the pipecat bot here: 0.5 GB and seconds to start) starts in one worker only.
One lane alone took 26 minutes of wall clock for 6 minutes of CPU (the tests wait on real time), so lanes
side by side keep the run short. Through the session fixtures above and their modules' `xdist_group` marks: the
clock tests on the reference Realtime agent (`test_voice_clock.py`, `_gaps`, `_stops`: many calls each) are the
`audio-clock` lane; the tests on the pipecat bot's own clock, over its pipecat path and its provider lines
(`test_voice_clock_pipecat.py`, `test_voice_clock_lines.py`: one clock bot, `voice_bot_clock`) are
`audio-lines`; the SIP tests (baresip agents, the SIP clock) `audio-sip`; every other audio test is the `audio`
lane."""


GROUP_ORDER = ("audio", "audio-lines", "audio-sip", "audio-bot", "audio-clock", "browser", "db")
"""Under `--dist loadgroup` the groups are handed out in this order, and every ungrouped test after them
(`LONG_FIRST`'s modules first). A lane worker takes the next group once its last test is left
(tests/lane_scheduling.py). The groups' seconds of tests in a fresh-clone CI run of 2026-12-07 (`--durations=0`,
summed by the `@group` of each test id): audio 445, browser 331, sip 265, lines 183, bot 173, clock 118, db 36;
ungrouped 898. Handing out the longest first (audio, browser, sip, lines, bot, clock, db) ends the lanes sooner on
paper (~560 s against ~690 s, replayed on three lane workers), but in the fresh-clone runs it was slower: 12 min
41 s and 13 min 47 s of tests against 11 min 48 s for this order on the same code, and the clock calls of the
lines lane were made again more often (`test_voice_clock_lines[twilio]` 91-94 s against 43-60 s): Chromium from
the start beside two real-time lanes starves them, and a starved clock call is called again. So the browser group
goes last, when fewer lanes run beside it. xdist hands its work units out in the order it collected them
(`--no-loadscope-reorder`, set in pytest_configure); by default it sorts them by test count, and a lane of few,
long tests (the clock lanes) then started only when another worker ran dry. The bot lane's long setups are whole
suite runs against the one shared bot (its start and warm-up call: 5.6 s), not the bot's start. Since that CI run
the audio lane's unread-replies, wait and tool-agent calls are calls of other runs, its twilio one-call run makes
two at once, and the SIP IVR's calls are made beside each other (test_sip_ivr.py, where the audio lane's
SIP unread-replies calls went). Measured module by module, before and after back to back (load 4-11), that is
some 180 s less of the audio and SIP lanes; the audio lanes alone (`-m audio -n 3 --dist loadgroup`) took 763 s at
load 7-18 before and 496 s at load 4-8 after, the lanes left as they were (lines, bot, clock) 963 s and 654 s of
tests: much of that run-to-run difference is the load."""


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


LONG_FIRST = ("test_pytest_plugin.py", "test_plugins.py", "runtime/test_kills.py", "store/test_store_lite.py",
              "targets/test_faults_rest_size.py", "targets/test_target_keys.py",
              "runtime/test_faults_disk.py", "cli/test_crash_list.py", "test_example_a2a_shop.py",
              "test_fixture_cleanup.py",
              "models/test_model_sdk_calls.py", "jsonl/test_jsonl_design.py", "store/test_ci_examples.py",
              "evaluators/test_evaluators.py", "test_forked.py")
"""Modules under tests/ with the longest ungrouped tests, longest first (seconds of wall clock at -n 2 on the
loaded 2-core machine: a nested pytest over two xdist workers 24, a plug-in target run 16, the kill rounds 15,
5,000 generated tests 12, the MCP example suite 10; at -n 3 beside other runs, load 5-7, 11-14 s each for the
tests that start a fresh interpreter on purpose: the store's imports, a 400 MB line's memory, an endless
stream, a disk that fills): they start before every other ungrouped test. Collected in folder order they came
last (tests/test_*.py sort after the folders) and one of them ran alone at the end of the run, the other
workers idle. Modules whose tests are one of tests/sdk_groups.py's groups are not here: a group is handed out
before every ungrouped test already."""

for _module in LONG_FIRST:
    if not (ROOT / "tests" / _module).is_file():
        raise RuntimeError(f"tests/conftest.py LONG_FIRST names tests/{_module}, which is gone")


def _rank(item: pytest.Item) -> tuple[int, int]:
    group = _group(item)
    if group is None:
        module = item.path.relative_to(ROOT / "tests").as_posix() if item.path.is_relative_to(ROOT / "tests") else ""
        if module in LONG_FIRST:
            return len(GROUP_ORDER) + 1, LONG_FIRST.index(module)
        return len(GROUP_ORDER) + 2, 0
    return (GROUP_ORDER.index(group), 0) if group in GROUP_ORDER else (len(GROUP_ORDER), 0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: before `-m` deselects by mark and before xdist reads the groups
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, mark in MARK_BY_FIXTURE.items():
            if fixture in fixtures and item.get_closest_marker(mark) is None:
                item.add_marker(mark)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = next((name for name in GROUPS if item.get_closest_marker(name) is not None), None)
        if group == "audio":
            group = next((lane for fixture, lane in AUDIO_LANE_BY_FIXTURE.items() if fixture in fixtures), group)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # in an xdist worker (whose `dist` option xdist resets to "no"): its collection is the order work is handed out
    if hasattr(config, "workerinput"):
        items.sort(key=_rank)  # stable: a group's tests, and the ungrouped ones, keep their module order


LANE_WORKERS = int(os.environ.get("TAMESU_TEST_LANE_WORKERS", "3"))
"""How many xdist workers may run the groups of GROUP_ORDER (one each at a time); any worker beyond them runs
only ungrouped tests, niced (`lane_scheduling.py`). Three lanes at once is what two cores were measured to
carry without a real-time test failing on load."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LaneScheduling | None:
    if config.getoption("dist", None) != "loadgroup":
        return None
    return LaneScheduling(config, log, lanes=GROUP_ORDER, lane_workers=LANE_WORKERS)


STOPPING = (signal.SIGTERM, signal.SIGHUP)
"""What ends a pytest process from outside (a CI runner's timeout, a closed terminal, `kill PID`): by default
each ends it on the spot, its session fixtures' agents, bots and Chromium left running for good."""


def _interrupted(signum: int, _frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one ends pytest at once, finalizers or not
    raise KeyboardInterrupt(f"pytest got {signal.Signals(signum).name}")


def stop_as_interrupted() -> None:
    """SIGTERM and SIGHUP act as Ctrl-C: pytest stops the test in hand and runs every fixture's finalizer, which
    ends what the fixture started. In the controller and in each xdist worker (each loads this conftest), on
    the main thread; again before each test, as a test may have left a signal to its default or to tamesu's
    own handler (an event loop's, `exit_before_the_run`'s). A signal ignored stays ignored (`nohup pytest`)."""
    for signum in STOPPING:
        with contextlib.suppress(ValueError):  # not the main thread: the signal stays as it was
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, _interrupted)


BACKGROUND_NICE = int(os.environ.get("TAMESU_TEST_NICE", "15"))
"""The niceness an xdist worker takes when it starts its first test that is not a lane's: an ungrouped test, or
one of a group that only shares a worker's imports (tests/sdk_groups.py) (TAMESU_TEST_NICE=0 keeps it).
The lanes (GROUP_ORDER) are handed out to the lane workers (LANE_WORKERS) before every ungrouped test, so a lane
worker that takes one has no lane left to run, and a worker beyond them runs nothing else, while other workers
may still run their lanes: tests that measure real time (an audio call against its agent's clock, a bot that
must keep up with the caller's speech) beside ungrouped tests that mostly burn CPU (tamesu runs, servers,
fuzzing). At 15 the ungrouped tests take the cores the lanes leave idle, about a thirtieth of a core the lanes
want too. Measured in fresh clones on the quiet machine, 4 workers, 3 of them lane workers: at 5, 8 min 24 s of
tests, the lanes 1,273 s in all; at 15, 8 min 13 s, the lanes 1,192 s (the clock lane 196 s to 157 s).
Everything the worker starts afterwards inherits it (the warm forks take their caller's: tests/forked.py);
what it started earlier (a lane's bot) keeps its own."""
_background = False
_warmed: set[str | None] = set()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # tryfirst: around pytest-timeout's wrapper, which starts the clock
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    warm_before(item)
    return (yield)


def warm_before(item: pytest.Item) -> None:
    """The heavy modules the tests of `item`'s group import in this process (sdk_groups.WARM), imported once per
    worker before the first such test's timeout starts, and before `pytest_runtest_setup` nices the worker."""
    for key in (None, _group(item)):
        if key in _warmed:
            continue
        _warmed.add(key)
        for module in sdk_groups.WARM.get(key, ()):
            with contextlib.suppress(ImportError):  # an SDK not installed: the test that needs it says so
                importlib.import_module(module)


def pytest_runtest_setup(item: pytest.Item) -> None:
    global _background
    stop_as_interrupted()
    if not _background and BACKGROUND_NICE and _group(item) not in GROUP_ORDER and hasattr(item.config, "workerinput"):
        _background = True
        os.nice(BACKGROUND_NICE)


_tree_before: set[Path] | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _tree_before
    if not hasattr(session.config, "workerinput"):  # the controller sees every worker's tests, before and after
        _tree_before = source_tree.files_under()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when its tests left files in examples/ or tests/fixtures (source_tree.py says why)."""
    if _tree_before is None:
        return
    left = source_tree.left_behind(_tree_before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        said = f"tests left files in the source tree (write them under tmp_path): {', '.join(left)}"
        if reporter is not None:
            reporter.write_line("")  # the progress line (`[100%]`) has no newline of its own yet
            reporter.write_line(said, red=True)
        else:
            print(said, file=sys.stderr)
        if exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP stop pytest as Ctrl-C does (`stop_as_interrupted`).

    An xdist controller starts the one warm process its workers fork their `tamesu` runs from (tests/forked.py),
    and the speech worker keeper every audio run borrows its workers from (tests/speech_keeper.py).

    `--dist loadgroup` under a pytest that loses its groups stops before the run, saying why.

    xdist carries a test's group to the scheduler as a suffix of its node id (`...::test@audio`); pytest 9.2's
    structured node ids ignore the assignment it makes (pytest-dev/pytest-xdist#1386), and every group is then
    spread over the workers with no word said: the real-time audio tests run at once and starve each other.
    pyproject.toml keeps pytest below 9.2 until xdist follows."""
    stop_as_interrupted()
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        forked.start_for_workers()  # before xdist starts the workers, which inherit where it listens
    if not hasattr(config, "workerinput"):
        speech_keeper.start()  # the same: the workers inherit TAMESU_SPEECH_KEEPER
    if config.getoption("dist", None) != "loadgroup":
        return
    config.option.loadscopereorder = False  # GROUP_ORDER decides which groups start first
    major, minor = (int(part) for part in pytest.__version__.split(".")[:2])
    if (major, minor) >= (9, 2):
        raise pytest.UsageError(f"pytest {pytest.__version__} loses --dist loadgroup's groups "
                                "(pytest-dev/pytest-xdist#1386): install 'pytest<9.2' (pyproject.toml's dev extra)")


def run_tamesu(args: list[str], cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`tamesu ARGS` in a child process, exactly as from a shell (forked from a warm process: tests/forked.py)."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    full_env.pop("TAMESU_DEBUG", None)
    if env and "PYTHONPATH" in env:
        full_env["PYTHONPATH"] = beside_ours(env["PYTHONPATH"])
    return forked.run(args, cwd, full_env, timeout)


def beside_ours(path: str) -> str:
    """A test's PYTHONPATH (a plug-in's folder) followed by the one the tests run with: in a worktree that is its
    `src`, and without it the child ran the tamesu installed in the venv, another checkout's code."""
    ours = [part for part in os.environ.get("PYTHONPATH", "").split(os.pathsep) if part]
    given = [part for part in path.split(os.pathsep) if part]
    return os.pathsep.join([*given, *(part for part in ours if part not in given)])


def warm_demo(history: Path) -> dict[str, str]:
    """What a demo script (scripts/demo*.py) needs in its environment to start its `tamesu run` as a fork of this
    worker's warm process (`TAMESU_COMMAND`, read by scripts/_examples.py): a fresh one imported tamesu, the
    target's SDKs and the store again, a second or more of CPU per demo. Its history goes in `history` (a
    tmp_path): by default it is kept beside the example's tamesu.yaml, in the source tree (source_tree.py)."""
    return {"TAMESU_COMMAND": shlex.join(forked.tamesu_command()), "TAMESU_STORE": str(history / "store.db")}


def why(record: dict[str, Any]) -> str:
    """A results.jsonl row's status with each run's error and failures: what a failing test's message needs
    (the console output alone is cut by pytest)."""
    said = [record.get("status", "?")]
    for run in record.get("runs", []):
        if run.get("error"):
            said.append(f"run {run.get('run')}: error: {run['error']}")
        said.extend(f"run {run.get('run')}: {failure}" for failure in run.get("failures", []))
    return "\n".join(map(str, said))


@pytest.fixture
def tamesu() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_tamesu


@pytest.fixture
def serve() -> Iterator[Callable[[Any], ThreadServer]]:
    """Start ASGI apps on 127.0.0.1 free ports; all stop when the test ends."""
    servers: list[ThreadServer] = []

    def start(app: Any) -> ThreadServer:
        server = ThreadServer(app).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def voice_bot_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The reference pipecat voice bot (examples/voice-bot), started once for every module that needs it:
    loading pipecat and its models is the slow part (once per bot), and each call gets a pipeline of its own.
    One warm-up call has built the first pipeline before the first test measures a turn (agents.voice_bot.warm).
    Its log is `voice-bot.log` in the session's temporary folder (`--basetemp`), to read after a failure."""
    from agents.voice_bot import voice_bot

    with voice_bot(warm_up=True, log=tmp_path_factory.mktemp("voice-bot") / "voice-bot.log") as url:
        yield url


@pytest.fixture(scope="session")
def voice_bot_clock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The pipecat voice bot with its own clock (`--clock-file`), started once for the clock tests of a worker
    (their lane): each tags its calls (`agents.voice_bot.calls_on_the_bots_clock`). Unwarmed: a clock test's
    first call has a long `turn_timeout` for the first pipeline, and no call's notes depend on another's."""
    from agents.voice_bot import ClockBot, voice_bot

    folder = tmp_path_factory.mktemp("voice-bot-clock")
    with voice_bot("--clock-file", str(folder / "clock.jsonl"), log=folder / "voice-bot.log") as url:
        yield ClockBot(url, folder / "clock.jsonl")


@pytest.fixture(scope="session")
def realtime_clock(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The calls on the reference Realtime agent's own clock that test_voice_clock.py and _gaps share
    (`agents.realtime_clock`), made once for the worker of their lane."""
    from agents.realtime_clock import clocked_calls
    from agents.voice import VOICE_MISSING

    if VOICE_MISSING is not None:
        pytest.skip(VOICE_MISSING)
    return clocked_calls(run_tamesu, tmp_path_factory.mktemp("realtime-clock"))
