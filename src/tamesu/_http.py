"""One SSL context for the whole process: building it loads the certificate bundle (about 25 ms each)."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import certifi
import httpx


@functools.cache
def ssl_context() -> ssl.SSLContext:
    # the same trust store httpx uses by default, built once
    return ssl.create_default_context(cafile=certifi.where())


def async_client(timeout: float, **options: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=timeout, verify=ssl_context(), **options)
