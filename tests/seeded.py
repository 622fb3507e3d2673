"""What a persona with `interrupt_probability: 1` draws in a run, from its test's id: the engine seeds each run
from the id (`RunInputs.seed`: the first run, not re-run), so a test can pick a name whose caller talks over a
reply early or late enough for the situation it builds."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from tamesu.audio.behaviors import Behaviour
from tamesu.suite.schema import Persona


def interrupt_draws(test_id: str, replies: int) -> list[float]:
    """After how many ms of each of its first `replies` replies the caller of `test_id` talks over it."""
    behaviors = Persona.model_validate({"behaviors": {"interrupt_probability": 1}}).behaviors
    seed = int(hashlib.sha256(test_id.encode()).hexdigest()[:8], 16) % 2**31
    behaviour = Behaviour(behaviors, seed)
    return [behaviour.interrupts() or 0.0 for _ in range(replies)]


def name_where(suite: str, prefix: str, replies: int, fits: Callable[[list[float]], bool]) -> str:
    """The first test name `prefix-K` in `suite` whose caller's draws fit."""
    for k in range(1000):
        if fits(interrupt_draws(f"{suite}/{prefix}-{k}", replies)):
            return f"{prefix}-{k}"
    raise AssertionError(f"no seed draws as asked for {prefix}")
