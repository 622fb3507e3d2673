"""docs/trace-context.md: tamesu sends `traceparent` alone; a suite's own `tracestate` and `baggage` in a target's
`headers:` go out as written, beside it, on every turn's request."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def test_tracestate_and_baggage_are_the_suites_own_beside_tamesus_traceparent(tmp_path: Path, tamesu,
                                                                               serve) -> None:
    seen: list[dict[str, str]] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(dict(request.headers))
        return JSONResponse({"text": "ok"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    for headers, sent in [("", {}), ("headers: { tracestate: 'vendor=abc', baggage: 'tenant={{env.TENANT}}' }",
                                     {"tracestate": "vendor=abc", "baggage": "tenant=shop-team"})]:
        seen.clear()
        (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop:
    type: rest
    url: '{url}/chat'
    request: {{ body: {{ message: '{{{{message}}}}' }} }}
    {headers}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'hi' }}, {{ say: 'thanks' }} ] }}
""")
        result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"TENANT": "shop-team"})
        assert result.returncode == 0, result.stdout + result.stderr
        assert len(seen) == 2, seen
        parents = [got.get("traceparent", "") for got in seen]
        assert all(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", p) for p in parents) and \
            parents[0] != parents[1], parents
        for got in seen:
            assert {name: got.get(name) for name in ("tracestate", "baggage")} == \
                {"tracestate": sent.get("tracestate"), "baggage": sent.get("baggage")}, got
