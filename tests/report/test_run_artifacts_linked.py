"""The HTML report links every file a run kept, not only its result and transcript: an MCP server's log here, a
browser's trace.zip, network.har and a visual check's diff alike (before, they were in the run folder with no link,
though a failure pointed at them: "diff in visual/home-diff.png", "(in mcp-server.log)")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from forked import script_command

SERVERS = Path(__file__).resolve().parents[1] / "agents" / "mcp_servers.py"


def test_the_files_a_run_kept_are_linked(tmp_path: Path, tamesu: Any) -> None:
    command, *args = script_command(SERVERS, "noisy", "--noise", "3")  # a stdio server that writes a log
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ when: "(?i)order", '
        'tool_calls: [{ name: get_order, args: { order_id: ORD-1001 } }], say: "It has shipped." }] }\n')
    (tmp_path / "noisy.tamesu.yaml").write_text(
        "targets:\n"
        # connect.timeout 60 s: 10 s ran out for a niced worker's server on a loaded machine
        f"  shop: {{ type: mcp, command: {json.dumps(command)}, args: {json.dumps(args)},\n"
        "          connect: { timeout: 60s } }\n"
        "tests:\n"
        "  - name: order\n"
        "    target: shop\n"
        '    scenario: { script: [{ say: "Where is my order?" }] }\n'
        "    assert: [{ contains: shipped }]\n")
    done = tamesu(["run", "--out", "out", "--report", "html:report.html"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = list((tmp_path / "out").glob("*/noisy/order/run-1"))
    assert (run / "mcp-server.log").is_file()
    links = [unquote(link) for link in re.findall(r'href="([^"#]+)"', (tmp_path / "report.html").read_text())]
    assert f"{run.relative_to(tmp_path).as_posix()}/mcp-server.log" in links, links
    assert all((tmp_path / link).exists() for link in links), links
