"""An agent (or the gateway in front of it) that answers HTTP 429 to tests run side by side: the request is sent
again after its Retry-After, said as a `rate_limited` event; a limit that never lifts is an infrastructure error,
not a failure of the agent's; `rate_limit_retries: 0` keeps a 429 as the turn's answer. An agent that refused
(a 401) is said to have refused, not only to have said nothing."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]


def limited_agent(refusals: int, retry_after: str = "0.2") -> Starlette:
    """Refuses each conversation's first `refusals` requests with 429 and `Retry-After: 0.2`, then answers."""
    seen: dict[str, int] = {}

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        session = str(body.get("session_id"))
        seen[session] = seen.get(session, 0) + 1
        if seen[session] <= refusals:
            return JSONResponse({"error": "rate limited"}, status_code=429, headers={"Retry-After": retry_after})
        return JSONResponse({"text": f"How can I help? ({body.get('message')})"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def suite(url: str, extra: str = "", assertion: str = "{ contains: How can I help }") -> str:
    return f"""\
targets:
  agent: {{ type: rest, url: "{url}/chat"{extra} }}
tests:
  - name: asks
    target: agent
    scenario: {{ script: [ {{ say: hi }}, {{ say: again }} ] }}
    assert: [ {assertion} ]
"""


def result_of(folder: Path) -> dict[str, Any]:
    [run] = list((folder / "out").iterdir())
    return json.loads(next(run.rglob("result.json")).read_text())


def test_a_429_is_waited_out_and_said(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: the 429's body was the turn's answer, "the agent said nothing", the test failed on the agent
    url = serve(limited_agent(refusals=2)).url
    (tmp_path / "s.tamesu.yaml").write_text(suite(url))
    result = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    detail = result_of(tmp_path)
    assert [t["agent"]["status"] for t in detail["turns"]] == [200, 200]
    limited = [e["data"] for e in detail["events"] if e["name"] == "rate_limited"]
    assert [(e["attempt"], e["retry_after_s"], e["wait_s"]) for e in limited] == [(1, 0.2, 0.2), (2, 0.2, 0.2)]
    # a green run does not hide it: the console's last words count it, and the job summary (before: only
    # result.json said it)
    said = result.stdout.rstrip().splitlines()
    noted = "along the way: 2 requests refused with HTTP 429 and sent again (rate_limited, 1 test)"
    assert noted in said, said
    summary = tamesu(["report", str(next((tmp_path / "out").iterdir())), "--report", "markdown:-"], cwd=tmp_path)
    assert f"> ℹ️ {noted}" in summary.stdout.splitlines(), summary.stdout
    page = next((tmp_path / "out").rglob("report.html")).read_text()
    assert f'<p class="note along-the-way">{noted}</p>' in page


def test_a_retry_after_of_no_time_is_waited_as_the_backoff(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # `Retry-After: 0`, or a date already past: three requests went again within milliseconds, a burst at a
    # gateway that had just refused, and the run ended "answered HTTP 429 4 times"
    for asked in ("0", "Wed, 21 Oct 2015 07:28:00 GMT"):
        url = serve(limited_agent(refusals=2, retry_after=asked)).url
        folder = tmp_path / ("zero" if asked == "0" else "past")
        folder.mkdir()
        (folder / "s.tamesu.yaml").write_text(suite(url, ", connect: { backoff: 100ms }"))
        result = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=folder)
        assert result.returncode == 0, result.stdout + result.stderr
        limited = [e["data"] for e in result_of(folder)["events"] if e["name"] == "rate_limited"]
        assert [(e["attempt"], e["retry_after_s"], e["wait_s"]) for e in limited] == [(1, 0.0, 0.1), (2, 0.0, 0.2)]


def test_a_limit_that_never_lifts_is_an_infrastructure_error(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: "lower --parallel" at --parallel 1 too, where no other run was asking the agent; and "(3 runs at
    # once)" at --parallel 3, where the suite's one test was the only run going
    url = serve(limited_agent(refusals=100)).url
    (tmp_path / "s.tamesu.yaml").write_text(suite(url, ", rate_limit_retries: 2"))
    alone = "raise its limit or rate_limit_retries (one run at a time: no other of tamesu's was asking it)"
    for parallel, advice in [("1", alone), ("3", alone)]:
        result = tamesu(["run", "s.tamesu.yaml", "--out", f"out{parallel}", "--parallel", parallel], cwd=tmp_path)
        output = result.stdout + result.stderr
        assert result.returncode == 3, output
        assert (f"POST {url}/chat: the agent answered HTTP 429 (too many requests) 3 times: {advice} "
                "(rate_limit_retries: 0 takes a 429 as the turn's answer)") in output, output
    [run] = list((tmp_path / "out1").iterdir())
    assert json.loads(next(run.rglob("result.json")).read_text())["status"] == "error"


def test_the_advice_names_the_runs_going_when_the_429_came_not_the_parallel_setting(
        tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # three tests at --parallel 8: the agent holds each first request until all three have come, then refuses
    # every request, so the first run to give up was one of three going (before: "(8 runs at once)")
    came: set[str] = set()
    all_came = asyncio.Event()

    async def chat(request: Request) -> JSONResponse:
        came.add(str((await request.json()).get("session_id")))
        if len(came) >= 3:
            all_came.set()
        await asyncio.wait_for(all_came.wait(), 30)
        return JSONResponse({"error": "rate limited"}, status_code=429, headers={"Retry-After": "0.05"})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    three = suite(url, ", rate_limit_retries: 1") + "".join(
        f"  - {{ name: asks {n}, target: agent, scenario: {{ script: [ {{ say: hi }} ] }} }}\n" for n in (2, 3))
    (tmp_path / "s.tamesu.yaml").write_text(three)
    result = tamesu(["run", "s.tamesu.yaml", "--out", "out", "--parallel", "8"], cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    figures = re.findall(r"lower --parallel \((\d+) runs were going when it came\)", output)
    assert "3" in figures and "8" not in figures and "runs at once" not in output, output


def test_no_retries_keeps_the_429_as_the_answer(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # a test of the agent's own rate limit
    url = serve(limited_agent(refusals=100)).url
    (tmp_path / "s.tamesu.yaml").write_text(suite(url, ", rate_limit_retries: 0", "{ status: 429 }"))
    result = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [e for e in result_of(tmp_path)["events"] if e["name"] == "rate_limited"]


def test_an_agent_that_refused_is_said_to_have_refused(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # a wrong token's 401 is a turn (a test may check it with `status:`), but "the agent said nothing" alone
    # sent the user to read the agent's code, not its token
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"error": "invalid token"}, status_code=401)

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    (tmp_path / "s.tamesu.yaml").write_text(suite(url))
    result = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert ('contains: expected the agent to say "How can I help"; the agent said nothing in 2 turn(s) (its answers: '
            "HTTP 401 on turn 1, HTTP 401 on turn 2)") in result.stdout, result.stdout


def test_tamesu_test_says_it_too(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # the JSONL console's summary: before, only the records said it
    url = serve(limited_agent(refusals=1)).url
    result = tamesu(["test", "-n", f"{url}/chat", "-i", "hello"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "along the way: 1 request refused with HTTP 429 and sent again (rate_limited, 1 test)" in result.stdout, \
        result.stdout
