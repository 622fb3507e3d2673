"""How many files a run may have open. Every conversation in flight holds sockets (its agent's connection, the
model's, a listener, a websocket) and maybe a child's pipes, so `--parallel 1000` needs a few thousand; Linux
starts a login session at a soft limit of 1,024 (macOS at 256) below a hard limit often 500 times higher, and a
run past the soft one fails its tests with `Too many open files`. Like Go's runtime (tamesu's Go original
inherited it), tamesu raises its soft limit to the hard one as a run starts; a hard limit too low for the run is
said before any test starts."""

from __future__ import annotations

import contextlib

FILES_PER_CONVERSATION = 4
"""A conversation's sockets and pipes: a persona run against a REST agent held 211 files at 100 conversations at
once (its agent's and its model's connection each, about 10 of the run's own), with room for a listener, a
websocket or a child's pipes."""

FILES_FOR_THE_RUN = 64
"""The run's own: the interpreter, its results files, the store, the console, the watchdog's pipe."""

MAX_SOFT_LIMIT = 1 << 20
"""The most asked for: some systems report an unlimited hard limit that no process may take whole."""


def allow_open_files(at_once: int) -> str | None:
    """Raise this process's soft limit on open files to its hard limit (children inherit it); a warning when the
    hard limit is below what `at_once` conversations may need, else None."""
    try:
        import resource
    except ImportError:  # not a POSIX system: its own defaults stand
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    ceiling = MAX_SOFT_LIMIT if hard == resource.RLIM_INFINITY else min(hard, MAX_SOFT_LIMIT)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        with contextlib.suppress(OSError, ValueError):  # a system that refuses keeps the soft limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
    needed = FILES_FOR_THE_RUN + FILES_PER_CONVERSATION * at_once
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    return (f"{at_once} conversations at once may need about {needed:,} open files and this system allows "
            f"{soft:,} (`ulimit -n`): tests past it fail with 'Too many open files'; raise the limit or lower "
            "--parallel")
