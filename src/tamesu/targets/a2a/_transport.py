"""Which binding, URL and protocol version a session speaks, chosen from the card and the target's keys.

Without `transport`: when the card is about the target's url (an interface of the card has that URL, this
machine's names taken as one: `_this_machine`; or the url is only an origin, with no path, and the card lists
interfaces), the card's preferred interface among those is used (the first the card lists; a 0.3 card lists its
`url`/`preferredTransport` first), at the url's spelling of its host. Otherwise grpc for a grpc:// or grpcs://
url, else jsonrpc, at the url as written.

With `transport`: the card's interface of that binding at the url; else the card's interface of that binding
at another URL (tamesu goes there); else the url as written.

Among interfaces of one binding, A2A 1.0 is preferred to a later version, then to 0.3. Without a card, or
for a binding the card does not list, the version is the best one the card uses, else 1.0.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from a2a.types.a2a_pb2 import AgentCard, AgentInterface
from packaging.version import InvalidVersion, Version

from tamesu.types import is_loopback

BINDINGS = {"jsonrpc": "JSONRPC", "http": "HTTP+JSON", "grpc": "GRPC"}
"""The target's `transport` values and the card's protocolBinding names."""
KEYS = {name: key for key, name in BINDINGS.items()}
DEFAULT_VERSION = "1.0"
PREFERRED_HERE = "the card's preferred interface for this url"
"""The reason of a choice the card made alone (no `transport`): a refusal then says so."""


class NoSpokenInterface(ValueError):
    """The card lists interfaces, none of a binding tamesu speaks."""


@dataclass(frozen=True)
class Choice:
    binding: str
    """The card's name for it: JSONRPC, HTTP+JSON or GRPC."""
    url: str
    version: str
    """As the card writes it (0.3.0, 1.0); `shown_version` is major.minor."""
    reason: str

    @property
    def key(self) -> str:
        return KEYS.get(self.binding, self.binding.lower())

    @property
    def shown_version(self) -> str:
        try:
            parsed = Version(self.version)
        except InvalidVersion:
            return self.version
        return f"{parsed.major}.{parsed.minor}"

    def interface(self) -> AgentInterface:
        return AgentInterface(url=self.url, protocol_binding=self.binding, protocol_version=self.version)

    def at(self, url: str) -> bool:
        """Whether this is the place `url` names (a gRPC address in any of its written forms)."""
        return _same(self.interface(), url)


def _binding(interface: AgentInterface) -> str:
    name = interface.protocol_binding.upper()
    return {"JSON-RPC": "JSONRPC", "HTTP": "HTTP+JSON", "REST": "HTTP+JSON", "HTTP_JSON": "HTTP+JSON"}.get(name, name)


def _rank(version: str) -> int:
    if not version:
        return 3
    try:
        parsed = Version(version)
    except InvalidVersion:
        return 5
    if (parsed.major, parsed.minor) == (1, 0):
        return 0
    if parsed >= Version("1.0"):
        return 1
    if parsed >= Version("0.3"):
        return 2
    return 4


def _best(interfaces: list[AgentInterface]) -> AgentInterface | None:
    return min(interfaces, key=lambda i: _rank(i.protocol_version), default=None)


def grpc_target(url: str) -> tuple[str, bool]:
    """host:port to dial and whether to use TLS, from any form a card or a suite writes a gRPC address in:

    - a bare host:port (what the A2A SDKs write and dial, 1.0 and 0.3): TLS unless the host is a loopback one;
    - a URL (the 0.3 spec's "absolute URL", which the A2A TCK's 0.3 client reads): grpcs:// and https:// use
      TLS, grpc:// and http:// do not; a path is dropped (gRPC routes by service, not by path);
    - gRPC's own target names, `dns:///host:port`, `dns:host:port`, `ipv4:host:port`, `ipv6:[::1]:port`: read
      as the host:port they name, TLS as for a bare one.
    """
    if url.startswith("dns://") and not url.startswith("dns:///"):
        # dns://resolver/host:port: which DNS server resolves the name is gRPC's business, not ours
        return _bare(url.removeprefix("dns://").split("/", 1)[-1])
    for prefix in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if url.startswith(prefix):
            return _bare(url.removeprefix(prefix))
    if "://" not in url:
        return _bare(url)
    parts = urlsplit(url)
    tls = parts.scheme in ("grpcs", "https")
    host_port = parts.netloc
    if ":" not in host_port.rsplit("]", 1)[-1]:
        host_port += ":443" if tls else ":80"
    return host_port, tls


def _bare(host_port: str) -> tuple[str, bool]:
    host = host_port.rsplit(":", 1)[0].strip("[]") if ":" in host_port else host_port
    return host_port, not is_loopback(host)


def _this_machine(host: str) -> bool:
    """localhost, 127.0.0.1 and ::1 name this machine, and so does the 0.0.0.0 (::) a server bound to every
    interface writes on its card: a url and a card that spell it differently are about the same place."""
    if is_loopback(host):
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _place(host_port: str) -> str:
    """host:port, lower-cased, with this machine's names as one."""
    host, sep, port = host_port.lower().rpartition(":")
    if not sep or "]" in port:  # no port (`h`), or an IPv6 address without one (`[::1]`)
        host, port = host_port.lower(), ""
    return f"{'localhost' if _this_machine(host.strip('[]')) else host}:{port}"


def _same(interface: AgentInterface, url: str) -> bool:
    if _binding(interface) == "GRPC" or urlsplit(url).scheme in ("grpc", "grpcs"):
        return _place(grpc_target(interface.url)[0]) == _place(grpc_target(url)[0])
    return _http_key(interface.url) == _http_key(url)


def names_url(card: AgentCard, url: str) -> bool:
    """Whether the card is about `url`: it lists an interface there, or lists none to tell."""
    listed = [i for i in card.supported_interfaces if i.url]
    return not listed or any(_same(i, url) for i in listed)


def _http_key(url: str) -> str:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host_port = parts.netloc.rpartition("@")[2]
    if not host_port.rpartition("]")[2].count(":"):
        host_port += {"http": ":80", "https": ":443"}.get(scheme, "")
    return f"{scheme}://{_place(host_port)}{parts.path.rstrip('/')}"


def _as_written(interface: AgentInterface, url: str) -> AgentInterface:
    """The card's interface at `url`, reached by the name `url` gives its host (`localhost` where the card says
    127.0.0.1 or 0.0.0.0): the card was read there, so that name reaches the agent from here."""
    if _binding(interface) == "GRPC" or urlsplit(url).scheme in ("grpc", "grpcs"):
        if grpc_target(interface.url)[0].lower() == grpc_target(url)[0].lower():
            return interface
        written = url
    else:
        listed, ours = urlsplit(interface.url), urlsplit(url)
        if listed.netloc.lower() == ours.netloc.lower():
            return interface
        written = listed._replace(netloc=ours.netloc).geturl()
    return AgentInterface(url=written, protocol_binding=interface.protocol_binding,
                          protocol_version=interface.protocol_version)


def _only_origin(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.path in ("", "/") and not parts.query


def choose(card: AgentCard | None, url: str, transport: str | None) -> Choice:
    is_grpc_url = urlsplit(url).scheme in ("grpc", "grpcs")
    wanted = BINDINGS[transport] if transport else None
    if card is None:
        binding = wanted or ("GRPC" if is_grpc_url else "JSONRPC")
        return Choice(binding, url, DEFAULT_VERSION, "no agent card: the url as written, A2A 1.0")
    listed = [i for i in card.supported_interfaces if i.url]
    interfaces = [i for i in listed if _binding(i) in KEYS]
    if listed and not interfaces and not wanted:
        offered = ", ".join(f"{i.protocol_binding or '?'} {i.protocol_version or ''} at {i.url}".replace("  ", " ")
                            for i in listed[:5])
        raise NoSpokenInterface(f"the agent card offers no interface tamesu speaks (JSONRPC, HTTP+JSON, GRPC): "
                                f"it offers {offered[:300]}")
    at_url = [i for i in interfaces if _same(i, url)]
    if not at_url and _only_origin(url):
        at_url = interfaces
    fallback_version = (_best(interfaces) or AgentInterface(protocol_version=DEFAULT_VERSION)).protocol_version
    if wanted:
        here = _best([i for i in at_url if _binding(i) == wanted])
        if here is not None:
            return _choice(_as_written(here, url), "transport, as the card lists it at this url")
        there = _best([i for i in interfaces if _binding(i) == wanted])
        if there is not None:
            return _choice(there, "transport, at the URL the card gives for it")
        return Choice(wanted, url, fallback_version or DEFAULT_VERSION,
                      "transport, at the url as written (the card does not list this binding)")
    if at_url:
        preferred = _binding(at_url[0])
        best = _best([i for i in at_url if _binding(i) == preferred])
        assert best is not None
        return _choice(_as_written(best, url) if _same(best, url) else best, PREFERRED_HERE)
    binding = "GRPC" if is_grpc_url else "JSONRPC"
    same_binding = _best([i for i in interfaces if _binding(i) == binding])
    version = same_binding.protocol_version if same_binding is not None else fallback_version
    return Choice(binding, url, version or DEFAULT_VERSION,
                  "the card does not list this url: the url as written")


def _choice(interface: AgentInterface, reason: str) -> Choice:
    return Choice(_binding(interface), interface.url, interface.protocol_version or DEFAULT_VERSION, reason)
