"""The xdist groups of the tests that use a heavy SDK in the pytest process itself (not in a `tamesu` child).

An SDK is imported once per process, and an xdist worker is a process: spread over four workers, every worker
imported every SDK some test of its share used. As one group, the tests of an SDK run on one worker, one at a
time, and the other workers never import it. The tests that import one were found by emptying `sys.modules` of
the SDK after each test of a serial run and recording which test imported it again; a module whose tests
mostly use it is marked whole, else the tests (or the parameters) that do."""

from __future__ import annotations

import pytest

IN_PROCESS_SDKS = pytest.mark.xdist_group("model-sdks")
"""Tests that call a model through tamesu's providers: `import anthropic` costs 1.7 s of CPU and `import
openai` 0.5 s (each worker paid both in test-fast: 9 s of its CPU). About 20 s of tests."""

IN_PROCESS_MCP = pytest.mark.xdist_group("mcp-sdk")
"""Tests that open the mcp target or its stdio reader here: `mcp` and `mcp_types` cost 0.65 s of CPU. About
35 s of tests (most of it test_mcp_stdio_size's 400 MB line, in a child process)."""

IN_PROCESS_A2A_SERVER = pytest.mark.xdist_group("a2a-server")
"""Tests that serve A2A in this process (tests/agents/a2a_agents.py, tamesu's remote agents): a2a-sdk's server
side with its gRPC compat handler imports SQLAlchemy and a2a's client, 0.55 s of CPU, and each worker that ran one
of these modules' tests also started the module's agents. About 40 s of tests. tests/agents/a2a_agents.py is
imported in the fixtures and tests, not at collection, so the other workers never import it."""

WARM: dict[str | None, tuple[str, ...]] = {
    None: ("tamesu.net.clients",),  # aiohttp and httpx: every HTTP client of tamesu's, in most workers' tests
    "model-sdks": ("openai", "anthropic", "tamesu.models.openai", "tamesu.models.anthropic"),
    "mcp-sdk": ("tamesu.targets.mcp.connection",),
    "a2a-server": ("agents.a2a_agents",),
}
"""What a worker imports before the first test of each group (None: before its first test of any), outside that
test's timeout and before the worker nices itself (tests/conftest.py: `warm_before`). A test that imported them
itself did so under pytest-timeout's clock: with two CPU burners, a niced worker's first test of the mcp group
spent its 180 s compiling and importing aiohttp and the MCP SDK, and the import cut there left `aiohttp` half
made for every later test ('module aiohttp has no attribute client_exceptions')."""
