"""How an error line or a record names a URL a user wrote: never a `user:password@`, its query only when asked, a
text that is no URL at all (a template not rendered, `ws://[::1`) as written but for a userinfo."""

from __future__ import annotations

import pytest

from tamesu.net.urls import shown_url, userinfo_restored


@pytest.mark.parametrize(("url", "query", "shown"), [
    ("http://shop:pw-123@127.0.0.1:8000/chat?key=k-9", False, "http://***@127.0.0.1:8000/chat?..."),
    ("http://shop:pw-123@127.0.0.1:8000/chat?key=k-9", True, "http://***@127.0.0.1:8000/chat?key=k-9"),
    ("https://agent.example/a2a", False, "https://agent.example/a2a"),
    ("ws://bot:pw-123@[::1/ws", True, "ws://***@[::1/ws"),  # urlsplit refuses it: the line still hides the password
    ("ws://[::1/ws", False, "ws://[::1/ws"),
    ("{{env.BASE}}/chat", False, "{{env.BASE}}/chat"),
])
def test_a_url_is_named_without_its_password(url: str, query: bool, shown: str) -> None:
    assert shown_url(url, query=query) == shown


def test_the_mask_is_applied_to_what_is_shown() -> None:
    assert shown_url("http://127.0.0.1/x?t=sekret", lambda text: text.replace("sekret", "***"), query=True) == \
        "http://127.0.0.1/x?t=***"


KNOWN = {"http://127.0.0.1:8000": "shop:pw-123"}


@pytest.mark.parametrize(("written", "opened"), [
    ("http://***@127.0.0.1:8000/next", "http://shop:pw-123@127.0.0.1:8000/next"),  # the url it saw, copied
    ("http://127.0.0.1:8000/last?q=1", "http://shop:pw-123@127.0.0.1:8000/last?q=1"),  # no userinfo
    ("HTTP://127.0.0.1:8000/", "http://shop:pw-123@127.0.0.1:8000/"),
    ("http://***@127.0.0.1:8001/next", "http://***@127.0.0.1:8001/next"),  # another port: another origin
    ("https://127.0.0.1:8000/", "https://127.0.0.1:8000/"),  # another scheme
    ("http://evil.example/?to=127.0.0.1:8000", "http://evil.example/?to=127.0.0.1:8000"),
    ("http://own:pw@127.0.0.1:8000/", "http://own:pw@127.0.0.1:8000/"),  # the model's own: kept
    ("http://127.0.0.1:99999/", "http://127.0.0.1:99999/"),
])
def test_the_browser_agents_url_gets_the_suites_credentials_on_their_origin_only(written: str, opened: str) -> None:
    assert userinfo_restored(written, KNOWN) == opened
