"""Finding and reading the agent card: where to look, what it says, what it asks of the caller.

Over HTTP the card is looked for at `/.well-known/agent-card.json`, then `/.well-known/agent.json`, on the url's
origin, then under the url itself; the first answer that parses as a card (either version's format) wins, except
that a card at the origin that lists interfaces, none at the url, is kept only when there is none under the url (a
host serving several agents, each with its card under its own path, may have its own card at the origin:
`at_origin`, `_transport.names_url`). A request that never reaches the agent is retried as `connect` says and then
fails the session; a server that took the connection and gave no whole answer within connect.timeout +
turn_timeout ends the search there (it would hang as long at each other place: four places were four such waits);
any other failure (404, not JSON, not a card) moves on to the next place.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import AgentCard
from google.protobuf.json_format import ParseError

from tamesu.matching import one_line
from tamesu.targets._web_page import is_web_page, page_title
from tamesu.targets.a2a._errors import unreachable
from tamesu.types import JSONObject

WELL_KNOWN = ("/.well-known/agent-card.json", "/.well-known/agent.json")
CREDENTIAL_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"}


@dataclass
class CardSearch:
    card: AgentCard | None = None
    found_at: str | None = None
    tried: list[str] = field(default_factory=list)
    """`url: why not` for each place that had no card."""
    authenticated: bool = False
    """Read with the credentials already (gRPC's card calls): there is no other card to read."""
    extended: bool = False
    """The card is the authenticated extended one itself (gRPC's GetExtendedAgentCard, A2A 1.0)."""


def card_urls(url: str) -> list[str]:
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    places = [origin + path for path in WELL_KNOWN]
    base = f"{origin}{parts.path}".rstrip("/")
    if base != origin:
        places += [base + path for path in WELL_KNOWN]
    return places


def at_origin(place: str, url: str) -> bool:
    """Whether `place` is a card path at the origin of a url that has a path of its own."""
    parts = urlsplit(url)
    return parts.path.strip("/") != "" and urlsplit(place).path in WELL_KNOWN


@dataclass
class Fetched:
    card: AgentCard | None
    why_not: str = ""
    hung: bool = False
    """The server took the connection and gave no whole answer in time: it will not at the next place either."""


async def fetch_card(http: httpx.AsyncClient, place: str, within: float) -> Fetched:
    """The card at one place, whole within `within` seconds, or None and why not. Raises what `unreachable`
    recognises."""
    try:
        # httpx's timeouts are per read: a server sending a byte a second held the run until the test's timeout
        async with asyncio.timeout(within):
            response = await http.get(place, headers={"Accept": "application/json"})
    except TimeoutError:
        return Fetched(None, f"no whole answer within {within:g}s (connect.timeout + turn_timeout)", hung=True)
    except httpx.HTTPError as exc:
        if unreachable(exc) is not None:
            raise
        return Fetched(None, f"{type(exc).__name__}: {exc}")
    if response.status_code != 200:
        return Fetched(None, f"HTTP {response.status_code}")
    try:
        document = response.json()
        if (unlike := not_a_card(document)) is not None:
            return Fetched(None, unlike)
        return Fetched(parse_agent_card(document))
    except (json.JSONDecodeError, UnicodeDecodeError):
        page = response.text if "html" in response.headers.get("content-type", "") else ""
        if is_web_page(page):  # a site answering every path: said as it is, for the turn's line to name
            title = page_title(page)
            return Fetched(None, f"a web page{f' titled {title!r}' if title else ''}, not JSON")
        return Fetched(None, "not JSON")
    except RecursionError:  # JSON nested deeper than Python reads: no card is
        return Fetched(None, "JSON nested too deeply to read")
    except (ParseError, ValueError, TypeError) as exc:
        return Fetched(None, f"not an agent card: {one_line(str(exc), 200)}")


def not_a_card(document: object) -> str | None:
    """Why a JSON answer at a card's place is no agent card, which the SDK's reading would take as an empty one
    (a server answering `{"status": "ok"}` at every path gave a card with no name, no skills, no interface)."""
    if isinstance(document, dict) and "name" in document and _CARD_KEYS & document.keys():
        return None
    shown = one_line(json.dumps(document), 80)
    return f"not an agent card (no name, or none of {', '.join(sorted(_CARD_KEYS))}): {shown!r}"


_CARD_KEYS = frozenset({"url", "supportedInterfaces", "additionalInterfaces", "skills", "capabilities",
                        "protocolVersion", "preferredTransport", "defaultInputModes"})


def summary(card: AgentCard) -> JSONObject:
    return {"name": card.name, "version": card.version, "skills": [s.id for s in card.skills],
            "interfaces": [{"binding": i.protocol_binding, "url": i.url, "version": i.protocol_version}
                           for i in card.supported_interfaces],
            "streaming": card.capabilities.streaming, "push": card.capabilities.push_notifications,
            "extended": card.capabilities.extended_agent_card}


def security_schemes(card: AgentCard) -> list[str]:
    """The schemes the card asks callers to use (empty when it declares none)."""
    names = {name for requirement in card.security_requirements for name in requirement.schemes}
    return sorted(names or set(card.security_schemes))


def sends_credentials(headers: dict[str, str], card: AgentCard | None) -> bool:
    """Whether the headers carry credentials: Authorization and its usual kin, or an API key header the
    card's security schemes name."""
    wanted = set(CREDENTIAL_HEADERS)
    if card is not None:
        for scheme in card.security_schemes.values():
            api_key = scheme.api_key_security_scheme
            if scheme.HasField("api_key_security_scheme") and api_key.location.lower() == "header":
                wanted.add(api_key.name.lower())
    return any(name.lower() in wanted and value for name, value in headers.items())


def find_skill(card: AgentCard, wanted: str) -> str | None:
    """The id of the skill named `wanted` (its id or its name, in any case), or None."""
    folded = wanted.casefold()
    for skill in card.skills:
        if folded in (skill.id.casefold(), skill.name.casefold()):
            return skill.id
    return None


def skills_text(card: AgentCard) -> str:
    if not card.skills:
        return "it lists no skills"
    return "it has " + ", ".join(f"{s.id} ({s.name})" if s.name and s.name != s.id else s.id for s in card.skills)
