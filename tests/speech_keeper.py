"""One speech worker keeper (`tamesu.audio.keeper`) for a whole pytest run, so the audio runs of the tests borrow
warm speech workers instead of each starting two of its own.

Every audio `tamesu run` started two worker processes that imported their libraries and loaded Whisper and a
Piper voice: 1-2 s of CPU a run, up to 18 s of wall clock at load 20 before the run's first words, in some
hundred audio runs of the suite. The xdist controller (or a pytest without workers) starts the keeper before
its workers, which inherit `TAMESU_SPEECH_KEEPER` and hand it to every run, forked or not. The keeper starts a
worker only when a run asks for one and none is free, so a run with no audio test pays one idle interpreter.
It ends with the pytest process that started it (`lifeline.tied`, and SIGTERM at exit), its workers with it.

`TAMESU_TEST_SPEECH_KEEPER=0` turns it off: every run starts its own workers, as a user's run does. The tests of
the workers' own lifetime (tests/audio/test_speech_pool.py) take the variable out of their runs' environment.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from lifeline import tied
from tamesu.audio.pool import KEEPER_VAR


def start() -> None:
    """Start the keeper and name it in this process's environment (its children's), unless one is named."""
    if os.environ.get("TAMESU_TEST_SPEECH_KEEPER", "1") == "0" or os.environ.get(KEEPER_VAR):
        return
    folder = tempfile.mkdtemp(prefix="tamesu-speech-keeper-")
    path = os.path.join(folder, "socket")
    process = subprocess.Popen(tied([sys.executable, "-m", "tamesu.audio.keeper", path]), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    if not process.stdout.readline().startswith("keeping"):
        raise RuntimeError("the speech worker keeper did not start (its error is above)")

    def stop() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)

    atexit.register(stop)
    os.environ[KEEPER_VAR] = path


def without_keeper(env: dict[str, str]) -> dict[str, str]:
    """`env` for a run that must start its own speech workers (a test of their lifetime)."""
    return {key: value for key, value in env.items() if key != KEEPER_VAR}
