"""`max_response_bytes` for an mcp server over stdio: tamesu reads the server's stdout itself, holding no line
past the limit plus room for the JSON-RPC envelope (`tamesu.targets.mcp.stdio`). A hand-written server
(`agents/mcp_flood.py`) writes a 400 MB answer in 1 MB pieces: the turn says it was refused, as over HTTP, and
tamesu's peak memory (measured by the process that starts it, `ru_maxrss` of its children) stays far below
the line. The 300 kB answer against 100,000 bytes, beside HTTP's, is in `test_mcp_target.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sdk_groups import IN_PROCESS_MCP
from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.models.client import ModelRegistry
from tamesu.models.spec import ModelSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets.mcp.target import McpTarget, McpTargetSpec

# the tests here read with the stdio reader (or ENVELOPE_ROOM of its module) in this process
pytestmark = IN_PROCESS_MCP
FLOOD = Path(__file__).resolve().parents[1] / "agents" / "mcp_flood.py"
ROOT = Path(__file__).resolve().parents[2]
LINE_MB = 400
CAP = 65_536

# Runs `tamesu ARGS` and prints the peak resident memory of it and everything it started, in kB: this
# process has no other children, so RUSAGE_CHILDREN is tamesu's own (its MCP server's too, which is small).
_MEASURED = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "tamesu", *sys.argv[1:]], capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(done.returncode)
"""


def test_lines_are_cut_across_pieces_and_none_is_held_past_the_limit() -> None:
    from tamesu.targets.mcp.stdio import LineBound  # imports the MCP SDK: only in the worker of their group

    lines = LineBound(10)
    assert lines.feed(b'{"a":') == ([], None)
    assert lines.feed(b'1}\n{"b"') == ([b'{"a":1}'], None)
    assert lines.feed(b":2}\n\nxyz") == ([b'{"b":2}', b""], None)
    assert lines.feed(b"0123456") == ([], None)  # 10 bytes held: the limit, not past it
    assert lines.feed(b"7\nok\n") == ([], (11, 11))  # a line of 11 ends in this piece: refused whole
    endless = LineBound(10)
    assert endless.feed(b"fine\n" + b"z" * 20) == ([b"fine"], (20, None))  # its end never seen


def test_a_400_mb_line_is_refused_past_the_cap_and_never_held(tmp_path: Path) -> None:
    from tamesu.targets.mcp.stdio import ENVELOPE_ROOM

    rules = [{"when": "ping", "tool_calls": [{"name": "ping"}], "say": "It answered."},
             {"when": "flood", "tool_calls": [{"name": "flood", "args": {"megabytes": LINE_MB}}],
              "say": "unreachable"}]
    (tmp_path / "tamesu.yaml").write_text("models:\n  target: { provider: fake, rules: " + json.dumps(rules) + " }\n")
    (tmp_path / "flood.tamesu.yaml").write_text(
        "targets:\n"
        f"  shop: {{ type: mcp, command: {json.dumps(sys.executable)}, args: [{json.dumps(str(FLOOD))}], "
        f"max_response_bytes: {CAP}, call_timeout: 120s }}\n"
        "tests:\n"
        "  - name: flood\n"
        "    target: shop\n"
        '    scenario: { script: [{ say: "ping please" }, { say: "flood please" }] }\n')
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "300"}
    env.pop("TAMESU_DEBUG", None)
    done = subprocess.run([sys.executable, "-c", _MEASURED, "run", "--out", str(tmp_path / "out")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    said = "the answer of flood was refused: the answer was larger than max_response_bytes (65,536): read "
    assert said in done.stdout, done.stdout
    [result] = list((tmp_path / "out").glob("*/flood/flood/run-1/result.json"))
    detail = json.loads(result.read_text())
    assert detail["turns"][0]["agent"]["text"] == "It answered."  # the normal answer before it, read as always
    [cut] = [e["data"] for e in detail["events"] if e["name"] == "response_truncated"]
    assert cut["limit"] == CAP and CAP < cut["read"] <= CAP + ENVELOPE_ROOM + 65_536
    peak_mb = int(done.stdout.rsplit("MAXRSS_KB", 1)[1]) / 1024
    # tamesu with the mcp SDK loaded peaks near 85 MB here; reading the line whole took more than the line
    assert peak_mb < LINE_MB / 2, f"tamesu peaked at {peak_mb:.0f} MB reading a {LINE_MB} MB line"


async def test_a_tool_listing_past_the_cap_fails_the_start_saying_so(tmp_path: Path) -> None:
    store = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=store, env=dict(os.environ)),
                      artifacts_dir=tmp_path / "run", redactor=store.redactor, run_id="t", base_dir=tmp_path,
                      models=ModelRegistry({"target": ModelSpec(provider="fake", rules=[{"say": "hi"}])}))
    spec = McpTargetSpec.model_validate({"type": "mcp", "command": sys.executable,
                                         "args": [str(FLOOD), "--listing-kb", "300"], "max_response_bytes": CAP})
    target = McpTarget(spec, "shop")
    try:
        with pytest.raises(InfraError) as caught:
            await target.open(session)
    finally:
        await target.close()
        await session.models.aclose()  # type: ignore[union-attr]
    assert str(caught.value).startswith(
        "mcp target shop: the MCP server did not start: its answer was refused: the answer was larger than "
        "max_response_bytes (65,536): read "), caught.value

