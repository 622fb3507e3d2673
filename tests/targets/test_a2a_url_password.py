"""An a2a target's url renders its `user:password@` as a run renders every url (`Context.render_url`): a
templated password holding `/` is percent-encoded, so the host stays whole and the agent is reached (f9108a1d
changed the line; no test sent such a url to an A2A agent)."""

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
