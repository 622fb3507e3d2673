"""A SIP trunk for tests: a UDP registrar that asks for digest credentials (RFC 3261 22, RFC 2617 with
qop=auth), and takes calls to numbers only from a caller that proves them, then answers each call with a
fixed final status (486 Busy Here by default) so no media is needed.

It runs in a thread of the test process on 127.0.0.1 and a free port; what it saw is kept in `seen`
(method, request URI, the user that authenticated or None, whether the digest was right)."""

from __future__ import annotations

import hashlib
import re
import secrets
import socket
import threading
from dataclasses import dataclass, field

_PARAM = re.compile(r'(\w+)=(?:"([^"]*)"|([^,\s]+))')
_COMPACT = {"v": "via", "f": "from", "t": "to", "i": "call-id", "m": "contact", "l": "content-length"}


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@dataclass
class Request:
    method: str
    uri: str
    headers: list[tuple[str, str]]

    def first(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


def parse(datagram: bytes) -> Request | None:
    head = datagram.split(b"\r\n\r\n", 1)[0].decode("utf-8", errors="replace")
    lines = head.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] != "SIP/2.0":
        return None  # a response, or keep-alive noise
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers.append((_COMPACT.get(name, name), value.strip()))
    return Request(parts[0], parts[1], headers)


@dataclass
class Seen:
    method: str
    uri: str
    user: str | None
    digest_ok: bool
    traceparent: str | None = None


@dataclass
class SipTrunk:
    username: str
    password: str
    realm: str = "trunk.test"
    call_status: tuple[int, str] = (486, "Busy Here")
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = self._socket.getsockname()[1]
        self._nonce = secrets.token_hex(8)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="sip-trunk", daemon=True)

    def __enter__(self) -> SipTrunk:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                datagram, peer = self._socket.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            request = parse(datagram)
            if request is None or request.method == "ACK":
                continue  # an ACK to a final answer ends its transaction: nothing to say back
            answer = self._answer(request)
            self._socket.sendto(answer.encode(), peer)

    def _answer(self, request: Request) -> str:
        if request.method not in ("REGISTER", "INVITE", "BYE", "CANCEL", "OPTIONS"):
            return self._response(request, 405, "Method Not Allowed")
        if request.method not in ("REGISTER", "INVITE"):
            return self._response(request, 200, "OK")
        # a registrar asks with 401 and WWW-Authenticate; a proxy taking a call with 407 and Proxy-Authenticate
        asked, answer = ("www-authenticate", "authorization") if request.method == "REGISTER" else \
            ("proxy-authenticate", "proxy-authorization")
        credentials = request.first(answer)
        if credentials is None:
            self.seen.append(Seen(request.method, request.uri, None, False, request.first("traceparent")))
            challenge = f'Digest realm="{self.realm}", nonce="{self._nonce}", algorithm=MD5, qop="auth"'
            code, reason = (401, "Unauthorized") if request.method == "REGISTER" else \
                (407, "Proxy Authentication Required")
            return self._response(request, code, reason, [(asked, challenge)])
        given = {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
                 for m in _PARAM.finditer(credentials)}
        ok = self._digest_ok(request.method, given)
        self.seen.append(Seen(request.method, request.uri, given.get("username"), ok, request.first("traceparent")))
        if not ok:
            return self._response(request, 403, "Forbidden")
        if request.method == "REGISTER":
            contact = request.first("contact") or ""
            return self._response(request, 200, "OK", [("contact", f"{contact};expires=300"), ("expires", "300")])
        return self._response(request, *self.call_status)

    def _digest_ok(self, method: str, given: dict[str, str]) -> bool:
        if given.get("username") != self.username or given.get("nonce") != self._nonce:
            return False
        ha1 = _md5(f"{self.username}:{given.get('realm', '')}:{self.password}")
        ha2 = _md5(f"{method}:{given.get('uri', '')}")
        if given.get("qop") == "auth":
            expected = _md5(f"{ha1}:{self._nonce}:{given.get('nc', '')}:{given.get('cnonce', '')}:auth:{ha2}")
        else:
            expected = _md5(f"{ha1}:{self._nonce}:{ha2}")
        return given.get("response") == expected and given.get("realm") == self.realm

    def _response(self, request: Request, code: int, reason: str, extra: list[tuple[str, str]] | None = None) -> str:
        to = request.first("to") or ""
        if code >= 200 and ";tag=" not in to:
            to += ";tag=trunk"
        lines = [f"SIP/2.0 {code} {reason}", *(f"Via: {via}" for via in request.all("via")),
                 f"From: {request.first('from') or ''}", f"To: {to}", f"Call-ID: {request.first('call-id') or ''}",
                 f"CSeq: {request.first('cseq') or ''}", *(f"{name.title()}: {value}" for name, value in extra or []),
                 "Content-Length: 0"]
        return "\r\n".join(lines) + "\r\n\r\n"
