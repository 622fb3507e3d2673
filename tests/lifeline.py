"""A fixture's process that ends with the pytest process that started it, however pytest ends (SIGKILL too,
where no finalizer runs: an xdist worker killed by its controller, an out-of-memory kill).

The command runs behind a few lines of Python that ask Linux for SIGTERM when their parent dies
(PR_SET_PDEATHSIG, which `exec` keeps) and then become the command, same pid. Linux sends it when the thread
that started the process ends, so start these only from pytest's main thread (session and module fixtures
are set up there), never from a thread of a test's own."""

from __future__ import annotations

import os
import sys

_TIE = ("import ctypes, os, signal, sys\n"
        "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"  # 1: PR_SET_PDEATHSIG
        "if os.getppid() != int(sys.argv[1]):\n"
        "    sys.exit(0)\n"  # the parent was gone before the line above took effect
        "os.execvp(sys.argv[2], sys.argv[2:])\n")


def tied(command: list[str]) -> list[str]:
    """`command`, ended with SIGTERM when this process (its thread that starts it) ends."""
    return [sys.executable, "-I", "-c", _TIE, str(os.getpid()), *command]


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
