"""A browser target's url renders its `user:password@` as a run renders every url (`Context.render_url`, f9108a1d):
a templated password holding `/` is percent-encoded, so the page opens; and the url is named without it, as every
other target's is (`net.urls.shown_url`): the browser_open event kept a password written in it, and a page that
did not load said it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from browser_fixtures import shared_chromium, web_shop_url
from conftest import run_tamesu

FIXTURES = (web_shop_url, shared_chromium)
"""Session fixtures of browser_fixtures, used by name below."""


def test_a_pages_url_with_a_password_opens_and_is_named_without_it(tmp_path: Path, web_shop_url: str,
                                                                   shared_chromium: str) -> None:
    # before: browser_open's url was 'http://shop:hunter2-pw@...' in result.json and the HTML report
    address = web_shop_url.removeprefix("http://")
    with socket.socket() as spare:  # a port nothing listens on
        spare.bind(("127.0.0.1", 0))
        gone = spare.getsockname()[1]
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  plain: {{ type: browser, url: "http://shop:hunter2-pw@{address}" }}
  templated: {{ type: browser, url: "http://shop:{{{{secrets.SHOP_PW}}}}@{address}" }}
  gone: {{ type: browser, url: "http://shop:hunter2-pw@127.0.0.1:{gone}/", load_timeout: 5s }}
tests:
  - {{ name: plain, target: plain, steps: [{{ action: assert_text, text: Find a book }}] }}
  - {{ name: templated, target: templated, steps: [{{ action: assert_text, text: Find a book }}] }}
  - {{ name: gone, target: gone, steps: [{{ action: assert_text, text: Find a book }}] }}
""")
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, timeout=180,
                      env={"SHOP_PW": "Zq8pw/Xk?y#z", "TAMESU_BROWSER_CDP_URL": shared_chromium})
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert f"browser target gone: http://***@127.0.0.1:{gone}/ did not load" in said, said
    opened = [e["data"]["url"] for p in (tmp_path / "out").rglob("result.json")
              for e in json.loads(p.read_text())["events"] if e["name"] == "browser_open"]
    assert sorted(opened) == sorted([f"http://***@{address}"] * 2 + [f"http://***@127.0.0.1:{gone}/"]), opened
    for word in ("hunter2-pw", "Zq8pw"):
        assert word not in said, said
        for path in (tmp_path / "out").rglob("*"):
            if path.is_file():
                assert word.encode() not in path.read_bytes(), path
