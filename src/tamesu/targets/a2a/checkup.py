"""What `tamesu doctor` says of an a2a target: the agent card read as a run reads it, and the binding a run would
speak, checked as far as can be without sending a message.

The target is opened as a run opens it (the card at the well-known places, or gRPC's card calls; the binding
chosen from it), with short timeouts, one attempt per connection, and no push listener; nothing is sent to the
agent but the card requests. A chosen gRPC binding is then probed as gRPC (`net.grpc_channels.probe`): the card may
name another port than the one it came from; an HTTP one the card names at another host or port than the url is
tried with a GET (`_unreachable_elsewhere`). The line says what was checked and what was not.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.net.grpc_channels import probe
from tamesu.suite.secrets import Redactor
from tamesu.suite.templates import Context
from tamesu.targets.a2a import A2ATarget
from tamesu.targets.a2a._errors import unreachable
from tamesu.targets.a2a._spec import A2ASpec
from tamesu.targets.a2a._transport import BINDINGS, grpc_target

CHECK_TIMEOUT = 5.0
"""Each card request's whole answer, and each connection, in `tamesu doctor` (a run gives turn_timeout)."""


async def check(spec: A2ASpec, name: str, context: Context, redactor: Redactor, folder: Path,
                timeout: float = CHECK_TIMEOUT) -> tuple[bool | None, str]:
    """(True: fine, None: worth knowing, False: a run will fail) and one line, masked."""
    quick = spec.model_copy(update={
        "turn_timeout": min(spec.turn_timeout, timeout), "push": False,
        "connect": spec.connect.model_copy(update={"attempts": 1, "timeout": min(spec.connect.timeout, timeout)})})
    target = A2ATarget(quick, name)
    with tempfile.TemporaryDirectory(prefix="tamesu-doctor-") as scratch:
        session = Session(context=context, artifacts_dir=Path(scratch), redactor=redactor, run_id="doctor",
                          base_dir=folder)
        try:
            # four card places, each bounded, and the extended card: a whole bound besides, for a server that
            # trickles its answers past every one of them
            async with asyncio.timeout(6 * timeout):
                await target.open(session)
            choice = target._choice  # this package's own target: the interface a run would speak
            away = None if choice is None or choice.binding == "GRPC" else await _unreachable_elsewhere(
                target, choice.url, target._url, timeout)
        except InfraError as exc:
            return False, redactor.text(" ".join(str(exc).split()))
        except TimeoutError:
            return False, f"the agent card could not be read within {6 * timeout:g}s"
        finally:
            with contextlib.suppress(Exception):
                await target.close()
    said = {event.name: event.data for event in session.events}
    card, missing, transport = said.get("card"), said.get("card_missing"), said.get("transport", {})
    if card is not None:
        fine: bool | None = True
        words = f"agent card {card.get('name') or '(no name)'} read at {card.get('found_at')}"
    else:
        tried = "; ".join(str(t) for t in (missing or {}).get("tried", []))
        fine, words = None, f"no agent card ({tried}): a run assumes the agent does what the target asks"
    words += f"; a run speaks {BINDINGS.get(str(transport.get('binding')), transport.get('binding'))} " \
             f"{transport.get('protocol_version')} at {transport.get('url')}"
    if away is not None:
        fine, words = False, f"{words}, the interface the agent card gives, which cannot be reached: {away}"
    elif choice is not None and choice.binding == "GRPC":
        host_port, tls = grpc_target(choice.url)
        ready, how = await probe(f"{'grpcs' if tls else 'grpc'}://{host_port}", spec.tls)
        fine = fine if ready else None
        words += f": {how}"
    else:
        words += " (not called: doctor sends the agent no message)"
    return fine, redactor.text(words)


async def _unreachable_elsewhere(target: A2ATarget, chosen: str, url: str, timeout: float) -> str | None:
    """Why the HTTP interface the card named at another host or port than url cannot be reached (a container's
    hostname, a stale port), or None. The card was read at url, so only another place is tried: a GET, which no
    A2A binding takes as a message, answered anything at all is reached."""
    if _host_port(chosen) == _host_port(url) or target._wire is None:
        return None
    try:
        async with asyncio.timeout(timeout):
            await target._wire.http.get(chosen)
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except Exception as exc:  # the wire's own: only a connection that never came is this check's
        return unreachable(exc)
    return None


def _host_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    try:
        return (parts.hostname or "", parts.port or {"http": 80, "https": 443}.get(parts.scheme))
    except ValueError:
        return (parts.netloc, None)
