"""What a SIP call that did not connect says (its own module to keep the target's small): the environment's
errors when the INVITE or the REGISTER reached nothing, and what to check when a challenge was the last word."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tamesu.errors import InfraError

if TYPE_CHECKING:
    from tamesu.targets.sip.phone import CallState
    from tamesu.targets.sip.spec import SipSpec

AUTH_CHALLENGES = {401, 407}
REQUEST_TIMEOUT = 408


def credentials_hint(spec: SipSpec, code: int) -> str:
    """What to check when a challenge (401, 407) was the last word: PJSIP answers one once, with the trunk's
    credentials when they are for its realm, and gives up with the challenge's own status."""
    if code not in AUTH_CHALLENGES:
        return ""
    trunk = spec.trunk
    if trunk is None or not trunk.username:
        where = "set trunk.username and trunk.password" if trunk is not None else \
            "a call gets them from its `trunk` (username, password)"
        return f" (it asks for credentials and the target gives none: {where})"
    realm = f", and trunk.realm ({trunk.realm!r}) against the realm it asks for" if trunk.realm != "*" else ""
    return f" (the credentials were not taken: check trunk.username and trunk.password{realm})"


def not_reached(what: str, to: str, spec: SipSpec, state: CallState | None, started: float) -> InfraError:
    """The INVITE (to `to`, as the log may show it) reached nothing: where tamesu was sent is wrong (or the agent
    is down), so the environment's fault; it read as the agent refusing the call (`502 gethostbyname() has returned
    error`) or not answering."""
    if state is not None and state.code != REQUEST_TIMEOUT:  # PJSIP's own status: the transport's error
        return InfraError(f"{what}: the call to {to} did not get through: {state.reason}: is the address right, is "
                          "the agent running?")
    waited = f"{spec.ring_timeout:g}s" if state is None else f"{state.at - started:.0f}s"
    return InfraError(f"{what}: nothing answered the call to {to} within {waited}, and it never rang: is the "
                      "address right, is the agent running?")


def unregistered(what: str, registrar: str, spec: SipSpec, started: float, *, at_ring_timeout: bool) -> InfraError:
    """The REGISTER the call waits for went unanswered: where tamesu was sent (or a registrar that is down), so
    the environment's fault; it read as an unanswered call, or as the trunk refusing with 408."""
    assert spec.trunk is not None
    waited = f"{spec.ring_timeout:g}s (ring_timeout)" if at_ring_timeout else \
        f"{time.monotonic() - started:.0f}s (PJSIP stopped resending it)"
    return InfraError(f"{what}: the registrar {registrar} never answered the REGISTER within {waited}: check "
                      f"trunk.host and trunk.port, and that a registrar runs there taking SIP over "
                      f"{spec.trunk.transport}; the call was not placed")
