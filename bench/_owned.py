"""The servers and agents a bench script starts end with it, however it ends (a SIGKILL from a test's timeout
too): the script takes part in tamesu's own watchdog (`tamesu.runtime.children`), which kills every process
started with its mark once the script is gone. Call `own_children()` first thing, before starting any."""

from __future__ import annotations


def own_children() -> None:
    from tamesu.runtime.children import arm

    arm()
