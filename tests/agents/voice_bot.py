"""The reference pipecat voice bot (examples/voice-bot/bot.py) as a child process, for the tests of the twilio
and voice targets. It runs in its own venv (`make .venv-voicebot`: pipecat-ai pins protobuf below 7, tamesu's
grpc target needs 7); without that venv, or without the voice extra here, the tests skip with the reason."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from websockets.exceptions import WebSocketException

from agents.voice import calls_one_at_a_time, starved
from lifeline import tied
from tamesu.audio.extra import problem
from tamesu.results.rundir import slug

ROOT = Path(__file__).resolve().parents[2]
BOT_DIR = ROOT / "examples" / "voice-bot"
BOT_PYTHON = Path(os.environ.get("VOICE_BOT_PYTHON", ROOT / ".venv-voicebot" / "bin" / "python"))
START_TIMEOUT_S = 90.0
"""A loaded machine imports pipecat and its models slowly; the bot says when it listens."""
WARM_TIMEOUT_S = 120.0
"""The warm-up call's limit: a first call on a machine busy starting every xdist worker loads Whisper, Piper and
Silero and synthesises the greeting; a bot that cannot greet in two minutes is broken, not slow."""


def bot_problem() -> str | None:
    missing = problem()
    if missing:
        return missing
    if not BOT_PYTHON.exists():
        return f"the voice bot's venv is missing ({BOT_PYTHON}): make .venv-voicebot"
    return None


BOT_MISSING = bot_problem()
needs_bot = pytest.mark.skipif(BOT_MISSING is not None, reason=BOT_MISSING or "")


def _drain(stream: IO[str], seen: list[str], log: IO[str] | None) -> None:
    for line in stream:
        seen.append(line)
        del seen[:-200]
        if log is not None:
            log.write(line)
            log.flush()


def warm(base: str, timeout: float = WARM_TIMEOUT_S) -> None:
    """One call over the bot's /twilio line until the first audio of its greeting comes back, then hang up.

    The bot loads Whisper and Piper before it listens, but its first call still builds the first pipeline (Silero,
    pipecat's lazy imports), at the very moment every xdist worker was importing too: when the models were
    loaded per call, the pipecat suite's first text turn took 15.9 s against its 15 s bound. A test measures the
    bot's turns, not its first load, so the fixture pays for that load here."""
    from websockets.sync.client import connect

    deadline = time.monotonic() + timeout
    with connect(f"{base}/twilio", open_timeout=timeout, close_timeout=5) as line:
        line.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        line.send(json.dumps({"event": "start", "streamSid": "warm-up",
                              "start": {"streamSid": "warm-up", "callSid": "warm-up"}}))
        while True:
            try:
                message = line.recv(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise TimeoutError(f"the voice bot sent no audio within {timeout:.0f} s of a call") from None
            if isinstance(message, str) and json.loads(message).get("event") == "media":
                return


@contextmanager
def voice_bot(*args: str, warm_up: bool = False, log: Path | None = None) -> Iterator[str]:
    """Start the bot; yields its base ws:// URL (paths /twilio, /vonage, /telnyx). Stopped, and waited for, after.
    With `warm_up`, one call (`warm`) has loaded its models before the URL is yielded. Its whole log goes to
    `log` when given: a call that went wrong under load is read there (the pipeline's warnings say which
    part of the bot gave up on what)."""
    sink = log.open("a", encoding="utf-8") if log is not None else None
    drainer: threading.Thread | None = None
    process = subprocess.Popen(tied([str(BOT_PYTHON), str(BOT_DIR / "bot.py"), *args]), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        seen: list[str] = []
        assert process.stdout is not None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if sink is not None:
                sink.write(line)
            found = re.search(r"listening http://127\.0\.0\.1:(\d+)", line)
            if found:
                # its log keeps coming: read it, or a full pipe would stall the bot
                drainer = threading.Thread(target=_drain, args=(process.stdout, seen, sink), daemon=True)
                drainer.start()
                base = f"ws://127.0.0.1:{found.group(1)}"
                if warm_up:
                    try:
                        warm(base)
                    except (OSError, TimeoutError, WebSocketException) as error:
                        raise RuntimeError(f"the voice bot did not answer a warm-up call ({error}):\n"
                                           + "".join(seen[-20:])) from error
                yield base
                return
        raise RuntimeError("the voice bot did not start:\n" + "".join(seen[-20:]))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        if drainer is not None:
            drainer.join(10)  # the bot's last lines, up to the end of its pipe
        if sink is not None and (drainer is None or not drainer.is_alive()):
            sink.close()


Call = tuple[str, dict, dict[str, list[float]]]
"""One call on the bot's clock: its test name, result.json, and what the bot noted (`first_audio_ms`,
`silence_ms`: lists in reply order)."""


@dataclass(frozen=True)
class ClockBot:
    """A bot started with `--clock-file` (the `voice_bot_clock` fixture): its base ws:// URL and the file of its
    notes, shared by the tests of a worker (each tags its calls apart: `calls_on_the_bots_clock`)."""

    url: str
    clock: Path


_RUNS = itertools.count(1)
"""Tags each `calls_on_the_bots_clock` apart on a shared bot: a name called by two tests (a rerun) is two names."""


def calls_on_the_bots_clock(tamesu: Callable, tmp_path: Path, bot: ClockBot, *, targets: dict[str, str], test: str,
                            repeat: int, timeout: float, again: Callable[[list[Call]], Collection[str]],
                            starved_extra: int = 0) -> list[Call]:
    """`targets` (name: YAML flow mapping, `{base}` for the clock bot's ws:// URL, `{call}` for `call=TAG`, which
    tags the bot's notes of this name's calls) called one at a time, up to `repeat` times each while `again`
    (given the calls so far) names it, `starved_extra` times more while every call was starved
    (`calls_one_at_a_time`). Returns each call, in the order they ran: its test
    name, result.json and what the bot noted on its clock: `first_audio_ms` and `silence_ms` (the longest
    silence of each reply), lists in reply order."""
    tags = {name: f"r{next(_RUNS)}-{name}" for name in targets}
    filled = {name: target.replace("{base}", bot.url).replace("{call}", f"call={tags[name]}")
              for name, target in targets.items()}
    calls = calls_one_at_a_time(tamesu, tmp_path, targets=filled, test=test, repeat=repeat, timeout=timeout,
                                again=lambda done: again(_with_notes(bot.clock, tags, done)),
                                starved_extra=starved_extra)
    return _with_notes(bot.clock, tags, calls)


def _with_notes(clock: Path, tags: dict[str, str], calls: list[tuple[str, dict]]) -> list[Call]:
    lines: dict[str, dict[int, dict[str, list[float]]]] = {}
    for text in clock.read_text(encoding="utf-8").splitlines() if clock.exists() else []:
        note = json.loads(text)
        own = lines.setdefault(note["call"], {}).setdefault(note["line"], {"first_audio_ms": [], "silence_ms": []})
        if "first_audio_ms" in note:
            own["first_audio_ms"].append(note["first_audio_ms"])
        else:  # written again as it grows: the last of a reply is its longest
            del own["silence_ms"][note["reply"] - 1:]
            own["silence_ms"].append(note["silence_ms"])
    # each name's calls ran in order, and so were its lines opened (numbered over the bot's life)
    noted = {name: [lines[tag][line] for line in sorted(lines.get(tag, {}))] for name, tag in tags.items()}
    seen: dict[str, int] = {}
    out = []
    for name, result in calls:
        k = seen[name] = seen.get(name, -1) + 1
        out.append((name, result, noted[name][k] if k < len(noted[name]) else {}))
    return out


def records(run_dir: Path) -> dict[str, dict]:
    """A run's results.jsonl records by test name."""
    return {r["test"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


@dataclass(frozen=True)
class ExampleRun:
    """A run of one of the bot's example suites (`suite_file` in the project folder, its `name`) made with
    several calls at once, and what a test needs to make one of its calls again alone (`again_alone`)."""

    run_dir: Path
    suite_file: str
    name: str
    bot_url: str
    tamesu: Callable[..., subprocess.CompletedProcess[str]]

    def result(self, test: str, run_dir: Path | None = None) -> dict:
        """`test`'s result.json, and its folder as `_dir`."""
        folder = (run_dir or self.run_dir) / slug(self.name) / slug(test) / "run-1"
        return {**json.loads((folder / "result.json").read_text()), "_dir": folder}

    def again_alone(self, test: str) -> Path:
        """`test` run again by itself against the bot (idle now): the new run's folder, made once per test.
        For a call of those at once whose tamesu waited for a core a tenth of the call or more (`starved`): at
        load 25 its loop waited 24-31 s of a 57-75 s call, the bot took 15 s to start a reply, and a barge-in's
        record came out of order."""
        project = self.run_dir.parent.parent
        out = project / f"again-{slug(test)}"
        if not out.is_dir():
            done = self.tamesu(["run", self.suite_file, "--out", str(out), "--filter", f"^{self.name}/{test}$"],
                               cwd=project, env={"VOICE_BOT": self.bot_url}, timeout=300)
            assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
        return next(d for d in out.iterdir() if d.is_dir())

    def outcomes(self) -> dict[str, dict]:
        """Each test's record; a failed one that was starved, made again alone."""
        made = records(self.run_dir)
        return {test: records(self.again_alone(test))[test] if record["status"] != "passed" and starved(record)
                else record for test, record in made.items()}

    def checked(self, test: str, checks: Callable[[dict], None]) -> None:
        """`checks` on `test`'s result; when they fail on a starved call, on a call made again alone."""
        try:
            checks(self.result(test))
        except (AssertionError, KeyError, IndexError, StopIteration):
            if not starved(records(self.run_dir)[test]):
                raise
            checks(self.result(test, self.again_alone(test)))


def closest(tamesu_by_call: list[tuple[str, float, float]]) -> dict[str, list[float]]:
    """tamesu's value minus the agent's own, per target name, one per call (a test takes the closer of a
    name's calls: a loaded machine can hold either process at the moment that counts)."""
    differences: dict[str, list[float]] = {}
    for name, measured, own in tamesu_by_call:
        differences.setdefault(name, []).append(round(measured - own, 1))
    return differences


if __name__ == "__main__":  # a manual check: start it and print the URL
    with voice_bot(*sys.argv[1:]) as url:
        print(url)
