"""docs/grpc.md's Python agent runs as the page prints it (before, a `...` in its ToolCall was a SyntaxError and
`main()` was never called), and the page's target passes a suite against it, over Converse and SendTurn."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

from conftest import run_tamesu
from lifeline import tied

PAGE = Path(__file__).resolve().parent.parent / "docs" / "grpc.md"


def _block(title: str, lang: str) -> str:
    section = PAGE.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert found, f"{title}: a {lang} block"
    return found.group(1)


def test_the_pages_python_agent_passes_the_pages_target(tmp_path: Path) -> None:
    agent = _block("Implementing it in Python", "python")
    target = _block("The target", "yaml")
    assert '"127.0.0.1:8790"' in agent and '"grpc://127.0.0.1:8790"' in target
    (tmp_path / "agent.py").write_text(agent.replace('"127.0.0.1:8790"', '"127.0.0.1:0"'), encoding="utf-8")
    process = subprocess.Popen(tied([sys.executable, str(tmp_path / "agent.py")]), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.append(process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=60)
        where = re.search(r"listening on (grpc://127\.0\.0\.1:\d+)", "".join(said))
        assert where, f"the agent never said where it listens: {said}"
        suite = target.replace("grpc://127.0.0.1:8790", where.group(1)) + """\
  by-call: { type: grpc, url: "URL", mode: unary }
tests:
  - name: order status
    target: shop
    scenario: { script: [ { say: "Where is my order ORD-1001?" } ] }
    assert:
      - contains: "Your order has shipped."
      - tool_called: { name: lookup_order, args: { order_id: ORD-1001 } }
  - name: order status by call
    target: by-call
    scenario: { script: [ { say: "Where is my order ORD-1001?" } ] }
    assert: [ { contains: shipped }, { tool_called: lookup_order } ]
""".replace("URL", where.group(1))
        (tmp_path / "suite.yaml").write_text(suite, encoding="utf-8")
        done = run_tamesu(["run", "suite.yaml", "--out", "out"], tmp_path,
                          env={"GRPC_AGENT_TOKEN": "any", "TAMESU_STORE": "off"})
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout, done.stdout
