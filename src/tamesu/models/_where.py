"""Where a provider's request went, as an error line names it.

The base URL a request goes to is the suite's `base_url`, else the SDK's environment variable
(`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`), else the provider's public API; naming the public API when the
environment sent the request elsewhere sends the reader to the wrong machine. So a failed connection names the
URL of the request that failed (the SDK's or tamesu's own, whichever sent it), and only when there is none the
base URL resolved the same way. Credentials a user put in the URL (`user:password@`), its query and fragment
never appear: the host, port and path are what the reader needs.
"""

from __future__ import annotations

import os

import httpx2

HIDDEN_USERINFO = "***@"
"""What stands for the `user:password@` of a URL in an error line (the user name may be a key, too)."""


def base_url_in_use(base_url: str | None, variable: str, default: str) -> str:
    """The base URL the SDK sends to: the one given, else its environment variable, else the public API."""
    return base_url or os.environ.get(variable) or default


def reached(exc: BaseException, endpoint: str, base_url: str) -> str:
    """The base URL `exc` (an SDK's connection error) failed to reach, shown without credentials or query.

    `endpoint` is the provider's path below its base URL (`/chat/completions`): the line names the base URL, as
    the user wrote it, rather than the endpoint. `base_url` is said when the error carries no request."""
    request: object = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    if isinstance(url, httpx2.URL) and url.is_absolute_url:
        path = url.raw_path.split(b"?", 1)[0].decode("ascii", "replace")
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
        return _shown(url, path)
    try:
        given = httpx2.URL(base_url)
    except Exception:  # a base URL httpx2 cannot read still names no credentials: say only that it was given
        return "the configured base_url"
    if not given.is_absolute_url:
        return "the configured base_url"
    return _shown(given, given.raw_path.split(b"?", 1)[0].decode("ascii", "replace"))


def _shown(url: httpx2.URL, path: str) -> str:
    userinfo = HIDDEN_USERINFO if url.userinfo else ""
    netloc = url.netloc.decode("ascii", "replace")  # host and port: httpx2 keeps the userinfo apart
    return f"{url.scheme}://{userinfo}{netloc}{path.rstrip('/')}"
