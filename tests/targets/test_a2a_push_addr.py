"""An a2a target's `push.url` (a tunnel's) needs the fixed port it leads to: an `addr` of port 0 is a free one too."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_a_push_url_beside_an_addr_of_port_0_is_refused_where_written(tmp_path: Path, tamesu: Any) -> None:
    # before: accepted (only a missing addr was refused); the listener took a free port the url could not lead to,
    # every notification lost and each turn slower through the fallback tasks/get
    (tmp_path / "suite.yaml").write_text("""\
targets:
  shop:
    type: a2a
    url: http://127.0.0.1:9/a2a
    push: { addr: "127.0.0.1:0", url: "https://tunnel.example.com/push" }
tests:
  - { name: hello, target: shop, scenario: { script: [ { say: hi } ] } }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "suite.yaml:5:11: targets.shop.push: url needs addr: the port the url leads to, where the listener binds "
        "(without addr, or with port 0, it takes a free port, which the url cannot know)", "1 problem found"], \
        result.stderr
