"""A grpc target's url renders as every target's does (`Context.render_url`, f9108a1d): a template in its
`user:password@` is percent-encoded, so a password holding `/`, `?` or `#` no longer ends the host (rendered as
text it was 'bad port in ...', exit 3, with the url quoted), and the password is on no line nor file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ports import refused_port
from targets.test_grpc_target import HEADERS, _stop, start_agent

PASSWORD = "s3c/ret?pw#0042"


@pytest.mark.parametrize("password", ["{{secrets.AGENT_PW}}", "hunter2-pw"])
def test_a_password_in_a_grpc_urls_userinfo_reaches_the_agent_and_is_never_said(tamesu: Callable, tmp_path: Path,
                                                                                password: str) -> None:
    # a templated one holding `/`: before f9108a1d 'grpc target g: bad port in ...', exit 3; a literal one (no
    # secret declared) is a credential all the same
    process, agent = start_agent()
    try:
        address = agent.url.removeprefix("grpc://")
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  g: {{ type: grpc, url: "grpc://agent:{password}@{address}", headers: {HEADERS} }}
tests:
  - {{ name: order, target: g, scenario: {{ script: [ {{ say: where is ORD-1001 }} ] }} }}
""")
        done = tamesu(["run", "suite.yaml", "--out", "out", "--color", "never"], cwd=tmp_path,
                      env={"AGENT_PW": PASSWORD})
    finally:
        _stop(process)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said + "".join(agent.output)
    run = json.loads(next((tmp_path / "out").rglob("result.json")).read_text())
    assert [turn["user"]["text"] for turn in run["turns"]] == ["where is ORD-1001"], run["turns"]
    assert run["turns"][0]["agent"]["text"], run["turns"]
    transport = next(e["data"] for e in run["events"] if e["name"] == "transport")
    assert transport["url"] == f"grpc://***@{address}", transport
    for word in ("s3c", "ret%3Fpw", "hunter2"):
        assert word not in said, said
        for path in (tmp_path / "out").rglob("*"):
            if path.is_file():
                assert word not in path.read_text(errors="replace"), path


def test_a_grpc_agent_not_there_is_named_without_the_password_in_its_url(tamesu: Callable, tmp_path: Path) -> None:
    # before: "cannot reach the agent at grpc://agent:hunter2-pw@127.0.0.1:P" on the console and in result.json
    port = refused_port()
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  g: {{ type: grpc, url: "grpc://agent:hunter2-pw@127.0.0.1:{port}", connect: {{ attempts: 1, timeout: 2s }} }}
tests:
  - {{ name: order, target: g, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    done = tamesu(["run", "suite.yaml", "--out", "out", "--color", "never"], cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert f"cannot reach the agent at grpc://***@127.0.0.1:{port} after 1 attempt(s)" in said, said
    assert "hunter2" not in said, said
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert "hunter2" not in path.read_text(errors="replace"), path
