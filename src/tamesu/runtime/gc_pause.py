"""The cyclic garbage collector paused while a large structure that lives on is built.

Loading a plan builds thousands of objects that live until the process ends (positions, specs, checks) and
makes almost no cyclic garbage; with the collector on, each of its collections walks them again, and the heap
it walks grows with the suite: 2000 tests took 1.14 s to load with it, 0.38 s without (`load_plan`, best of 5),
and a first collection afterwards walks them once (0.11 s) unless they were frozen first
(`tamesu.engine.heap.settle_for_a_run`). Reference counting frees everything else at once either way.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside; the collector is on again after it only if it was on before (so a caller
    can keep it paused across a load and what follows, up to its own freeze)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
