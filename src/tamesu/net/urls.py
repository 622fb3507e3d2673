"""Whether a URL written in a suite can be sent to at all: a host, and a port in range.

`https://agent:99999/chat` passed `validate` and was an `internal error: ValueError: Port out of range` in every
test of the run."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@")
_USERINFO_IN_TEXT = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")

_NEEDS_A_HOST = frozenset({"http", "https", "ws", "wss", "grpc", "grpcs"})


def url_problem(url: str) -> str | None:
    """What makes `url` one no request can go to, or None. A URL that still holds templates is not judged."""
    if "{{" in url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port  # reading it is what checks it
    except ValueError as exc:
        reason = str(exc)
        if "out of range" in reason or "cast to integer" in reason:
            return "the port is not a number from 1 to 65535"
        return f"not a URL ({reason})"
    if not parts.scheme:
        return "no scheme: write where it is, from http://, https://, ws:// or the like (a path alone names no server)"
    if parts.scheme.lower() in _NEEDS_A_HOST and not parts.hostname:  # file:// and about: need none
        return "no host after the scheme"
    if port == 0:
        return "the port is not a number from 1 to 65535"
    if parts.hostname and any(c.isspace() for c in parts.hostname):
        return "a space in the host"
    return None


REFUSAL_HINTS = {401: "check the target's headers (a token?)", 403: "check the target's headers (a token?)",
                 404: "does url name the agent's endpoint? (another server may hold that port)",
                 405: "does url name the agent's endpoint, and method its method?",
                 501: "does url name the agent's endpoint, and method its method? (a server that implements no such "
                      "method there answers 501: Python's http.server, a static file server, to a POST)"}
"""HTTP statuses a server answers before any agent reads the request (the url or the credentials are wrong, not
the agent), and what to check: the rest and a2a targets say them alike. A 501 (Not Implemented) is the server
saying it has no such method at all, as a 405 says it of the path: no agent there takes the request."""


def shown_url(url: str, mask: Callable[[str], str] = str, *, query: bool = False) -> str:
    """`url` as a line or a record names it: the secrets in it masked (`mask`), never a `user:password@` written in
    it (a credential whether or not it was declared a secret), and its query only with `query` (a key there is a
    credential too; an error line about a wrong host or path is not told by it)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # no URL (`ws://[::1`): its error is said elsewhere; a userinfo in it is hidden all the same
        return mask(_USERINFO.sub(r"\1***@", url))
    if not parts.scheme or not parts.netloc:
        return mask(url)
    host = parts.netloc.rpartition("@")[2]
    hidden = "***@" if "@" in parts.netloc else ""
    kept = f"?{parts.query}" if query and parts.query else "?..." if parts.query else ""
    return mask(f"{parts.scheme}://{hidden}{host}{parts.path}{kept}")


def userinfo_hidden(text: str) -> str:
    """`text` (a library's error line, which quotes the URL it was given) with the `user:password@` of every URL in
    it as `***@`, as `shown_url` names one."""
    return _USERINFO_IN_TEXT.sub(r"\1***@", text)


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def origin_of(url: str) -> str | None:
    """`scheme://host:port` of `url` (its default port written out, so `http://a` and `http://a:80` are one
    origin), or None for a URL with no host or no valid port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not parts.hostname or scheme not in _DEFAULT_PORTS:
        return None
    return f"{scheme}://{parts.hostname}:{port or _DEFAULT_PORTS[scheme]}"


def userinfo_of(url: str) -> str:
    """The `user:password` written in `url` ('' for none)."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ""
    return netloc.rpartition("@")[0]


def userinfo_restored(url: str, known: dict[str, str]) -> str:
    """`url` as a model wrote it, from a page's url it saw with its userinfo hidden (`***@`) or written without
    any, with the `user:password` the suite wrote for that origin (`known`, by `origin_of`) put back: the model
    never sees a credential and the page it names still opens. Another origin, or a userinfo of the model's own,
    is left as written: a credential goes only where the suite sent it."""
    origin = origin_of(url)
    if origin is None or origin not in known or userinfo_of(url) not in ("", "***"):
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{known[origin]}@{host}").geturl()
