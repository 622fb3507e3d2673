"""`tamesu doctor` of an mcp target at a url opens the MCP session as a run does (initialize, then the tool
listing, with the target's headers, bounded), and says each target of a url on its own line, against the MCP SDK's
own server (tests/agents/mcp_servers.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from targets.test_mcp_target import http_server

__all__ = ["http_server"]  # a fixture, imported to be found by pytest


def test_doctor_opens_each_mcp_targets_session_as_a_run_does(
        http_server: Callable[..., str], tmp_path: Path, tamesu: Any) -> None:
    # before: each line was a TCP connect, "reachable (TCP)" of a url at a wrong path and of a server that
    # refuses the token (each run then failed at its start, exit 3), and of two targets at one url one was said
    url = http_server("--token", "t0ken")
    base = url.removesuffix("/mcp")
    (tmp_path / "suite.yaml").write_text(f"""\
models:
  target: {{ provider: fake, rules: [ {{ say: hi }} ] }}
targets:
  shop: {{ type: mcp, url: '{url}', headers: {{ Authorization: "Bearer {{{{secrets.MCP_TOKEN}}}}" }} }}
  stale: {{ type: mcp, url: '{url}', headers: {{ Authorization: "Bearer expired" }} }}
  wrong_path: {{ type: mcp, url: '{base}/api', headers: {{ Authorization: "Bearer {{{{secrets.MCP_TOKEN}}}}" }} }}
tests: [ {{ name: t, target: shop, scenario: {{ script: [ {{ say: hi }} ] }} }} ]
""")
    result = tamesu(["doctor", "suite.yaml"], cwd=tmp_path, env={"MCP_TOKEN": "t0ken"})
    said = result.stdout
    assert result.returncode == 3, said + result.stderr
    lines = [line for line in said.splitlines() if line[6:].startswith("target ")]
    assert len(lines) == 3, said
    assert lines[0].startswith(f"ok    target shop (mcp) at {url}: MCP server ") and \
        "answered the session's start (initialize, protocol " in lines[0] and "tools (" in lines[0], said
    assert "get_order" in lines[0], said
    assert lines[1] == (f"FAIL  target stale (mcp) at {url}: the MCP server at {url} refused the session's start "
                        "(initialize): HTTP 401 Unauthorized: check the target's headers (a token?)"), said
    wrong = (f"the server at {base}/api answered the session's start (initialize) with HTTP 404 Not Found: does url "
             "name the MCP server's streamable HTTP endpoint (often /mcp)?")
    # as a run says it (it said "the MCP server cannot be reached: MCP error -32601: Not Found" of a server that
    # had answered)
    assert lines[2] == f"FAIL  target wrong_path (mcp) at {base}/api: {wrong}", said
    assert "reachable (TCP)" not in said and "t0ken" not in said + result.stderr and "Traceback" not in said
    (tmp_path / "suite.yaml").write_text((tmp_path / "suite.yaml").read_text().replace("target: shop,",
                                                                                      "target: wrong_path,"))
    ran = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"MCP_TOKEN": "t0ken"})
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert f"mcp target wrong_path: {wrong}" in ran.stdout, ran.stdout
