"""The garbage collector tuned for a run: a run allocates many short-lived objects (requests, events, models)
on top of a large heap made before it starts (the SDKs, the plan), which lives until the end.

Measured on 300 simulated conversations at 100 at once (`bench/persona.py`'s workload): the cyclic collector
took 0.65 s of 5.4 s of CPU, most of it in full collections walking the modules imported before the run.
Frozen, those objects are never walked again (`gc.freeze`); a larger first generation (10,000 allocations
rather than 700) makes 40 young collections where there were 750, each one still cheap. Together: 0.18 s.

What a young collection walks is mostly the objects of the conversations in flight (they survive it, and are
walked again in the middle generation), not the garbage it is for; so with more conversations at once each
collection costs more for the same garbage found. The first generation grows with the runs at once
(`YOUNG_PER_RUN` allocations each): 1000 persona conversations at once spent 1.9-2.5 s collecting with
10,000, and 0.9-1.0 s with 100,000, for 2-5 MiB more at the peak (`python bench/persona.py`).
Objects without cycles are freed by reference counting at once either way, so memory barely moves.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
YOUNG_PER_RUN = 100
YOUNG_MAX = 200_000


def young_threshold(at_once: int) -> int:
    """The first generation's size for `at_once` runs in flight."""
    return min(YOUNG_MAX, max(YOUNG_THRESHOLD, YOUNG_PER_RUN * at_once))


def settle_for_a_run(at_once: int = 1) -> None:
    """Freeze what exists now (imports, the plan) and collect the young generation less often, the less often
    the more runs are in flight at once (`young_threshold`). Idempotent; a larger setting is kept."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    wanted = young_threshold(at_once)
    if young < wanted:
        gc.set_threshold(wanted, middle, old)
