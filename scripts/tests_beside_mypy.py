"""`make test`'s last step: the tests, with mypy beside them instead of before them.

Usage: python scripts/tests_beside_mypy.py MYPY [ARGS...] -- PYTEST [ARGS...]

mypy takes about 40 s of one core on a fresh clone; much of the tests' wall clock waits on real time (audio
calls, agents answering) and leaves a core idle, so running it meanwhile takes that much off `make test`. The
tests print as they always do; mypy's report follows theirs. The exit code is the tests' when they failed,
else mypy's. Ctrl-C reaches both (they share the terminal's process group) and mypy is not waited for; a
SIGTERM or SIGHUP to this script is passed to the tests and ends mypy, so nothing started here outlives it.
mypy runs at a lower priority (MYPY_NICE): the real-time tests it runs beside must not wait for a core.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from types import FrameType

MYPY_GRACE_S = 600  # mypy's own bound once the tests are done: a fresh clone's full check takes about 40 s
MYPY_NICE = 10
"""mypy's niceness, added to this script's: it gets what the tests leave, and a test that measures real time
(an audio call against its agent's clock) never shares a core with it on equal terms."""


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") == 0 or argv.index("--") == len(argv) - 1:
        print("usage: tests_beside_mypy.py MYPY [ARGS...] -- PYTEST [ARGS...]", file=sys.stderr)
        return 2
    split = argv.index("--")
    mypy_command, test_command = argv[:split], argv[split + 1:]
    with tempfile.TemporaryFile(mode="w+") as report:
        mypy = subprocess.Popen(mypy_command, stdout=report, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_lower_priority)
        tests = subprocess.Popen(test_command)

        def pass_on(signum: int, _frame: FrameType | None) -> None:
            tests.send_signal(signum)
            mypy.kill()

        signal.signal(signal.SIGTERM, pass_on)
        signal.signal(signal.SIGHUP, pass_on)
        try:
            tests_code, interrupted = _wait(tests)
            print(f"{' '.join(mypy_command)} (run beside the tests):", flush=True)
            if interrupted:
                print("not waited for: the tests were interrupted", flush=True)
                return _exit_code(tests_code) or 130
            try:
                typed_code = mypy.wait(timeout=MYPY_GRACE_S)
            except subprocess.TimeoutExpired:
                print(f"mypy did not finish within {MYPY_GRACE_S} s of the tests", flush=True)
                typed_code = 1
            except KeyboardInterrupt:
                print("mypy was interrupted", flush=True)
                typed_code = 130
            report.seek(0)
            sys.stdout.write(report.read())
        finally:
            if mypy.poll() is None:
                mypy.kill()
                mypy.wait()
    return _exit_code(tests_code) if tests_code != 0 else _exit_code(typed_code)


def _lower_priority() -> None:
    os.nice(MYPY_NICE)  # in the child before it runs mypy (no thread runs in this script yet)


def _wait(process: subprocess.Popen[bytes]) -> tuple[int, bool]:
    """The process's exit code, and whether a Ctrl-C came meanwhile (it reached the process too, one process
    group, so it is waited out as it winds down)."""
    interrupted = False
    while True:
        try:
            return process.wait(), interrupted
        except KeyboardInterrupt:
            interrupted = True


def _exit_code(returncode: int) -> int:
    """A child's code as a shell gives it: a death by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
