"""An a2a target's url and push.url render their `user:password@` as a run renders every url
(`Context.render_url`): a templated password holding `/` is percent-encoded, so the host stays whole and the
agent (or the push listener) is reached (f9108a1d changed the lines; no test sent such a url)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


def test_an_a2a_url_whose_templated_password_holds_a_slash_reaches_the_agent(agents: A2AAgents, tmp_path: Path,
                                                                             tamesu: Any) -> None:
    # before: rendered as text, the password's `/` ended the host ('Invalid port', its head 'S3c' said)
    address = agents.urls["v10"].removeprefix("http://")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: a2a, url: 'http://shop:{{{{secrets.SHOP_PW}}}}@{address}/a2a' }}
tests:
  - {{ name: one, target: shop, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"SHOP_PW": "S3c/r3t?pw#x"})
    said = result.stdout + result.stderr
    assert result.returncode == 0 and "1 passed, 0 failed" in said, said
    assert "S3c" not in said, said


def test_a_push_url_whose_templated_password_holds_a_slash_reaches_the_listener(agents: A2AAgents, tmp_path: Path,
                                                                                tamesu: Any) -> None:
    # f9108a1d: push.url (what the agent posts its notifications to) rendered as text ended its host at the
    # password's `/`: every notification lost, each turn read through the fallback tasks/get instead
    import json
    import socket

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop:
    type: a2a
    url: '{agents.urls["v10"]}/a2a'
    push: {{ addr: '127.0.0.1:{port}', url: 'http://hook:{{{{secrets.HOOK_PW}}}}@127.0.0.1:{port}/a2a/push' }}
tests:
  - {{ name: one, target: shop, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"HOOK_PW": "S3c/r3t?pw#x"})
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    [run] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert [e for e in run["events"] if e["name"] == "push_received"], run["events"]
    assert "S3c" not in said, said
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert "S3c" not in path.read_text(errors="replace"), path
