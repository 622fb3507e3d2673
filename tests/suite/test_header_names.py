"""An HTTP header a suite writes (a target's `headers:`, `traces.query.headers`, a hook's, an `http` check's) whose
name is no HTTP token, or whose value spans lines, is refused where it is written (file:line:col, exit 2).
Before, `tamesu validate` passed it and every request of the run failed on it."""

from __future__ import annotations

from pathlib import Path


def test_header_names_and_values_no_request_can_carry_are_refused_where_written(tmp_path: Path, tamesu) -> None:
    (tmp_path / "tamesu.yaml").write_text("""\
suites: ['suite.yaml']
traces:
  query:
    jaeger: "http://127.0.0.1:16686"
    headers: { "x a": "v", "x-scope-orgid": "one\\ntwo" }
""")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  shop:
    type: rest
    url: 'http://127.0.0.1:9/chat'
    headers: { "x: a": "v", "authorization": "Bearer {{secrets.TOKEN}}", "{{env.HEADER_NAME}}": "v" }
  bot: { type: a2a, url: 'http://127.0.0.1:9/', headers: { "x\\na": "v" } }
  ok: { type: rest, url: 'http://127.0.0.1:9/c', headers: { "X-Api-Key": "k", "x_t.!#$%&'*+^`|~": "v" } }
tests:
  - name: order
    target: shop
    scenario: { script: [ { say: 'hi' } ] }
""")
    result = tamesu(["validate"], cwd=tmp_path, env={"TOKEN": "t"})
    assert result.returncode == 2, result.stdout + result.stderr
    lines = sorted(line for line in (result.stdout + result.stderr).splitlines() if ": " in line and ".yaml:" in line)
    assert lines == [
        "suite.yaml:5:16: targets.shop.headers.x: a: \"x: a\" is not an HTTP header name: letters, digits and "
        "!#$%&'*+-.^_`|~ only (no space, colon or line break)",
        "suite.yaml:6:60: targets.bot.headers.x\\na: \"x\\na\" is not an HTTP header name: letters, digits and "
        "!#$%&'*+-.^_`|~ only (no space, colon or line break)",
        "tamesu.yaml:5:16: traces.query.headers.x a: \"x a\" is not an HTTP header name: letters, digits and "
        "!#$%&'*+-.^_`|~ only (no space, colon or line break)",
        "tamesu.yaml:5:45: traces.query.headers.x-scope-orgid: a header's value is one line: this one holds a "
        "line break (CR or LF) or a NUL",
    ], lines
    assert "Traceback" not in result.stderr
