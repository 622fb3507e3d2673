"""A target whose url is a gRPC (HTTP/2-only) port: the request reaches no HTTP/1.1 server, so the run is the
environment's error (exit 3), one line saying what answered, not the agent's malformed answer cut at its first
line (`Bad status line:`). A real grpc server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from conftest import run_tamesu


@pytest.fixture
def grpc_port() -> Iterator[int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(0).wait(10)


@pytest.mark.parametrize("target", ["{ type: rest, url: 'http://127.0.0.1:PORT/chat' }",
                                    "{ type: a2a, url: 'http://127.0.0.1:PORT/' }"], ids=["rest", "a2a"])
def test_a_url_at_a_grpc_port_is_said_as_http2_and_is_the_environments(tmp_path: Path, grpc_port: int,
                                                                        target: str) -> None:
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  agent: {target.replace("PORT", str(grpc_port))}
tests:
  - name: hello
    target: agent
    scenario: {{ script: [ {{ say: hi }} ] }}
""")
    result = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert f"cannot reach http://127.0.0.1:{grpc_port}/" in output, output
    assert "it answered in HTTP/2 (a gRPC or HTTP/2-only port?), and this route speaks HTTP/1.1" in output, output
    assert "Bad status line" not in output and "Traceback" not in output, output
