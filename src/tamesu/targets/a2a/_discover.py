"""Finding what describes an A2A agent: its card at the well-known places (or from a gRPC agent's card call),
and the extended card an authenticated client may read.

An http(s) url: `_card` says where it is looked for. A grpc(s) url: `GetExtendedAgentCard` (1.0),
then `GetAgentCard` (0.3), with the headers (that card is already the authenticated one; read with
GetExtendedAgentCard, a `card_extended` event says how many skills it has, as `count`, with their ids, since
gRPC has no public card to count the added ones against). Found: a `card`
event (name, version, skill ids, interfaces, where); none: a `card_missing` event (where it was looked for),
and everything the card would say is assumed to be what the target asks for. A card that declares security
while the headers carry no credentials (`_card`): an `auth_missing` event. A card offering the authenticated
extended card, with credentials sent: it is read over the chosen binding and replaces the card, with a
`card_extended` event (`added`: how many skills it added; `error` when it could not be read, and the public
card stays). `skill` is then checked: not on the card, or no card to check it on, fails the session naming
the skills the card has.
"""

from __future__ import annotations

import contextlib

from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, GetExtendedAgentCardRequest

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.targets.a2a._card import CardSearch, at_origin, card_urls, fetch_card, find_skill, skills_text
from tamesu.targets.a2a._errors import SDK_ERRORS, agent_error
from tamesu.targets.a2a._transport import Choice, names_url
from tamesu.targets.a2a._wire import Wire


async def find_card(wire: Wire, url: str, turn_timeout: float) -> CardSearch:
    """The card at the first place that serves one, and why each place before it did not."""
    if url.startswith(("grpc://", "grpcs://")):
        return await _grpc_card(wire, url, turn_timeout)
    search = CardSearch()
    other: tuple[AgentCard, str] | None = None
    places = card_urls(url)
    for number, place in enumerate(places, start=1):
        fetched = await wire.call(place, lambda place=place: fetch_card(  # type: ignore[misc]  # a lambda binding the loop variable
            wire.http, place, wire.connect_timeout + turn_timeout), counted=False)
        card, why_not = fetched.card, fetched.why_not
        if fetched.hung:
            left = len(places) - number
            rest = "" if not left else ": the other place was not tried" if left == 1 else \
                f": the other {left} places were not tried"
            search.tried.append(f"{place}: {why_not}; the server took the connection and gave no whole answer{rest}")
            break
        if card is not None and (at_origin(place, url) and not names_url(card, url)):
            # a host's own card, about other URLs: the agent at this url may have one of its own under it
            other = other or (card, place)
            search.tried.append(f"{place}: the card of {card.name or 'another agent'}, which does not list url")
            continue
        if card is not None:
            search.card, search.found_at = card, place
            return search
        search.tried.append(f"{place}: {why_not}")
    if other is not None:  # none under the url: the host's card is the one there is (it may name url otherwise)
        search.card, search.found_at = other
    return search


async def _grpc_card(wire: Wire, url: str, turn_timeout: float) -> CardSearch:
    """A gRPC agent gives its card with GetExtendedAgentCard (1.0) or GetAgentCard (0.3)."""
    search = CardSearch()
    probe_card = AgentCard(capabilities=AgentCapabilities(extended_agent_card=True))
    for version, rpc in (("1.0", "GetExtendedAgentCard"), ("0.3", "GetAgentCard")):
        choice = Choice("GRPC", url, version, "")
        probe = wire.client(probe_card, choice, streaming=False)
        try:
            card = await wire.call(url, lambda probe=probe, choice=choice: probe.get_extended_agent_card(  # type: ignore[misc]  # a lambda binding the loop variable
                GetExtendedAgentCardRequest(), context=wire.context(choice, timeout=turn_timeout)),
                counted=False)
        except SDK_ERRORS as exc:
            search.tried.append(f"{url} {rpc} (A2A {version}): {agent_error(exc).message}")
            continue
        finally:
            with contextlib.suppress(Exception):
                await probe.close()
        search.card, search.found_at = card, f"{url} ({rpc}, A2A {version})"
        search.authenticated = True
        search.extended = rpc == "GetExtendedAgentCard"
        return search
    return search


async def extended_card(wire: Wire, session: Session, card: AgentCard, choice: Choice,
                        turn_timeout: float) -> tuple[AgentCard, str | None]:
    """The extended card, read with the target's credentials; the public card and why, when it cannot be read."""
    reader = wire.client(card, choice, streaming=False)
    try:
        extended = await wire.call(choice.url, lambda: reader.get_extended_agent_card(
            GetExtendedAgentCardRequest(), context=wire.context(choice, timeout=turn_timeout)))
    except SDK_ERRORS as exc:
        error = agent_error(exc).describe()
        session.event("card_extended", added=0, error=error)
        return card, error
    finally:
        with contextlib.suppress(Exception):
            await reader.close()
    known = {skill.id for skill in card.skills}
    added = [skill.id for skill in extended.skills if skill.id not in known]
    session.event("card_extended", added=len(added), skills=added, name=extended.name,
                  version=extended.version)
    return extended, None


def note_grpc_extended(session: Session, search: CardSearch) -> None:
    """A card read with gRPC's GetExtendedAgentCard is the extended card: said as HTTP's is, with every skill
    it has (there is no public card on gRPC to tell the added ones from)."""
    card = search.card
    if card is None or not search.extended:
        return
    skills = [skill.id for skill in card.skills]
    session.event("card_extended", count=len(skills), skills=skills, name=card.name, version=card.version,
                  rpc="GetExtendedAgentCard")


def assumed_card(streaming: bool, push: bool) -> AgentCard:
    """Without a card, the agent is taken to do what the target asks of it."""
    return AgentCard(capabilities=AgentCapabilities(streaming=streaming, push_notifications=push))


def checked_skill(wanted: str | None, card: AgentCard | None, search: CardSearch, what: str, looked: str,
                  unread: str | None = None, unasked: bool = False) -> str | None:
    """The id of the skill the target asks for (what `tamesu coverage` counts as exercised); raises InfraError
    when the card does not offer it or there is no card to ask. `looked` is where the card was looked for,
    masked; `unread`, why the extended card (which may hold the skill) could not be read; `unasked`, that the
    card offers one and the target sent no credentials to read it with."""
    if wanted is None:
        return None
    if card is None:
        raise InfraError(f"{what}: skill {wanted!r} needs the agent card, and none was found ({looked})")
    found = find_skill(card, wanted)
    if found is None:
        extended = f"; the extended card, which may, could not be read: {unread}" if unread else \
            ("; the card offers an authenticated extended card, which may: tamesu reads it when the target's "
             "headers send credentials (Authorization: \"Bearer {{secrets.X}}\")") if unasked else ""
        raise InfraError(f"{what}: the agent card ({card.name}) does not offer the skill {wanted!r}: "
                         f"{skills_text(card)}{extended}")
    return found
