"""What reading an MCP stdio server costs: the MCP SDK's own stdio transport against tamesu's bounded one
(`tamesu.targets.mcp.stdio`), in CPU of this process per tools/call.

    python bench/mcp_stdio.py [--calls N] [--megabytes M] [--rounds R]

Both drive the same SDK `Client` against `tests/agents/mcp_flood.py` (its own process, so its CPU never
counts): `--calls` small answers (`ping`), then one answer of `--megabytes` MB (`flood`, under a cap large
enough to read it). The rounds alternate the transports so the machine's noise falls on both alike; each
figure is the median over the rounds of `time.process_time` per call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tamesu.targets.mcp.connection import StdoutNoise, server_environment
from tamesu.targets.mcp.stdio import bounded_stdio

FLOOD = Path(__file__).resolve().parent.parent / "tests" / "agents" / "mcp_flood.py"


def _sdk(errlog: Any, cap: int) -> Any:
    return stdio_client(StdioServerParameters(command=sys.executable, args=[str(FLOOD)]), errlog=errlog)


def _tamesu(errlog: Any, cap: int) -> Any:
    def refused(note: str, read: int, declared: int | None) -> None:
        raise SystemExit(f"refused under a cap meant to read it: {note}")

    return bounded_stdio(sys.executable, [str(FLOOD)], server_environment({}), Path.cwd(), errlog,
                         StdoutNoise(errlog), cap, refused)


async def _round(transport: Callable[[Any, int], Any], calls: int, megabytes: int) -> tuple[float, float]:
    """CPU seconds per small call, and for the large answer."""
    with open(os.devnull, "w") as errlog:  # a file: the server's stderr needs a descriptor
        async with Client(transport(errlog, (megabytes + 1) * 1_000_000), cache=None) as client:
            await client.call_tool("ping", {})  # warm: the handshake and first call are not what is measured
            started = time.process_time()
            for _ in range(calls):
                await client.call_tool("ping", {})
            small = (time.process_time() - started) / calls
            started = time.process_time()
            result = await client.call_tool("flood", {"megabytes": megabytes})
            large = time.process_time() - started
    text = result.content[0].text  # type: ignore[union-attr]
    assert len(text) == megabytes * 1_000_000, len(text)
    return small, large


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--megabytes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    found: dict[str, list[tuple[float, float]]] = {"sdk": [], "tamesu": []}
    for _ in range(options.rounds):
        for name, transport in (("sdk", _sdk), ("tamesu", _tamesu)):
            found[name].append(await _round(transport, options.calls, options.megabytes))
    print(f"{options.calls} small calls and one {options.megabytes} MB answer, median of {options.rounds} rounds")
    for name, rounds in found.items():
        small = statistics.median(r[0] for r in rounds) * 1000
        large = statistics.median(r[1] for r in rounds) * 1000
        print(f"  {name:7} {small:6.3f} ms CPU per small call   {large:7.1f} ms CPU for the large answer")


if __name__ == "__main__":
    asyncio.run(main())
