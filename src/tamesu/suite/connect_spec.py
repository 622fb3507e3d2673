"""How a request that never reached the agent is retried: the `connect:` block of the targets that send over
HTTP, websockets and gRPC."""

from __future__ import annotations

from pydantic import Field

from tamesu.types import Duration, Strict, YamlInt


class ConnectSpec(Strict):
    """How a request that never reached the agent is retried."""

    attempts: YamlInt = Field(3, ge=1, le=100)
    """How many times a request that never reached the agent (refused, reset, DNS) is sent in all."""
    backoff: Duration = 0.5
    """The pause before the first resend; it doubles for each one after."""
    timeout: Duration = Field(10.0, gt=0)
    """How long connecting may take before the attempt counts as failed."""
