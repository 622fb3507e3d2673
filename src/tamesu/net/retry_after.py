"""How long a server asked to be left alone: `Retry-After` (seconds or an HTTP date), or OpenAI's `retry-after-ms`.

Read by the model providers (a 429 or 5xx from a model) and the rest target (a 429 from the agent)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping


def retry_after_from_headers(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` (OpenAI), or `retry-after` as seconds or an HTTP date."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
