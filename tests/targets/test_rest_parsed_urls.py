"""A rest turn's URL is parsed once for the process, not once a conversation (issue 28's eleventh pass,
docs/performance.md): each test's first turn parsed and checked its target's URL again (some 7 calls a turn at 5
turns a conversation). What a request is sent to is unchanged, and a URL that names no server is refused each
time it is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest
from multidict import CIMultiDict

from sessions import new_session
from tamesu.errors import InfraError
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.rest import http as rest_http
from tamesu.targets.rest.http import Http


def _http(tmp_path: Path) -> Http:
    return Http(session=new_session(tmp_path), connect=ConnectSpec(), pool_timeout=10, what="rest target",
                max_bytes=1_000_000)


async def test_a_url_is_parsed_once_for_every_conversation_that_sends_to_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = rest_http.url_problem
    monkeypatch.setattr(rest_http, "url_problem", lambda url: checked.append(url) or real(url))
    monkeypatch.setattr(rest_http, "_PARSED", {})
    url = "http://127.0.0.1:8123/chat?lang=fr"
    sent = [_http(tmp_path).request("POST", url, CIMultiDict(), b"{}").url for _ in range(3)]  # three conversations
    assert [str(u) for u in sent] == [url] * 3 and sent[0] is sent[2]
    assert checked == [url]
    for _ in range(2):  # never kept: refused every time, saying why
        with pytest.raises(InfraError, match=r"rest target: http://127\.0\.0\.1:99999/chat: the port is not a number"):
            _http(tmp_path).request("POST", "http://127.0.0.1:99999/chat", CIMultiDict(), None)


async def test_urls_that_change_every_turn_are_kept_no_more_than_the_limit(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest_http, "_PARSED", {})
    http = _http(tmp_path)
    for job in range(rest_http.MAX_PARSED_URLS * 2 + 5):  # a poll's job id in each URL
        assert str(http.request("GET", f"http://127.0.0.1:8123/jobs/{job}", CIMultiDict(), None).url).endswith(
            f"/jobs/{job}")
    assert len(rest_http._PARSED) <= rest_http.MAX_PARSED_URLS
