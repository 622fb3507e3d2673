"""Trust and TLS for every connection tamesu opens: the platform's trust store by default, a suite's `tls:` block
where a target or a model needs more, and one line naming the host and the reason when a handshake fails.

- Linux reads its trust store through OpenSSL's default paths, which honour `SSL_CERT_FILE` and `SSL_CERT_DIR`
  (a company's inspecting proxy or an internal CA added to the system store, or named by those variables, is
  trusted as every other tool on the machine trusts it); macOS and Windows ask the OS (`truststore`). A machine
  without any store (a bare container) falls back to certifi's bundle, as the SDKs do.
- `tls.ca_file` adds a CA to that store (an agent behind an internal CA), `cert_file` + `key_file` present a
  client certificate (mTLS), `server_name` is the name the certificate must carry (an agent reached by IP),
  `verify: false` turns checking off, with a warning on every run that uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import model_validator

from tamesu.errors import InfraError
from tamesu.types import HomePath, Strict, YamlBool


class TlsSpec(Strict):
    """A target's or a model's `tls:` block."""

    ca_file: HomePath | None = None
    """A PEM file of CAs trusted beside the platform's."""
    cert_file: HomePath | None = None
    """The client certificate (PEM) for servers that require one (mTLS); with `key_file`."""
    key_file: HomePath | None = None
    """The client certificate's private key (PEM); with `cert_file`."""
    server_name: str | None = None
    """The name the server's certificate must carry (and SNI), when it is not the URL's host."""
    verify: YamlBool = True
    """False: the server's certificate is not checked (a warning on every run)."""

    @model_validator(mode="after")
    def _pairs(self) -> TlsSpec:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together (the client certificate and its key)")
        return self


VERIFY_OFF_WARNING = ("TLS certificates are not checked for {what} (tls.verify: false): anyone on the way can read "
                      "and answer its traffic")


@functools.cache
def platform_context() -> ssl.SSLContext:
    if sys.platform in ("darwin", "win32"):
        import truststore

        context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        return context
    context = ssl.create_default_context()  # OpenSSL's default paths, SSL_CERT_FILE / SSL_CERT_DIR honoured
    paths = ssl.get_default_verify_paths()
    if paths.cafile is None and paths.capath is None:
        import certifi

        context.load_verify_locations(cafile=certifi.where())
    return context


def ssl_context(spec: TlsSpec | None = None) -> ssl.SSLContext | bool:
    """The context for connections under `spec` (built once per distinct block: loading a store costs ~25 ms);
    False when the block says `verify: false`. Bad files are the caller's one-line error (`TlsError`)."""
    if spec is None or spec == _PLAIN:
        return platform_context()
    return _context(spec.model_dump_json())


_PLAIN = TlsSpec()


def socket_tls(spec: TlsSpec | None = None) -> dict[str, Any]:
    """The TLS arguments of a websocket's `connect` (websockets takes a context only, never False) under `spec`:
    its context, a context that checks nothing for `verify: false`, and `server_name` as the name to check."""
    context = ssl_context(spec)
    if context is False:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    arguments: dict[str, Any] = {"ssl": context}
    if spec is not None and spec.server_name:
        arguments["server_hostname"] = spec.server_name
    return arguments


def deferred_context(spec: TlsSpec | None = None) -> Callable[[], ssl.SSLContext | bool]:
    """`ssl_context(spec)` for a client that may never open a TLS connection: the platform's store is loaded at
    the first one (a run against http:// agents spent ~25 ms of its ~110 ms of CPU loading a store it never
    used). A `tls:` block is built at once, so its unreadable files and its `verify: false` warning still come
    when the client is made."""
    if spec is None or spec == _PLAIN:
        return platform_context
    context = _context(spec.model_dump_json())
    return lambda: context


@functools.cache
def trusted_pem(ca_file: str | None = None) -> bytes:
    """The CAs a client that takes PEM bytes (gRPC) trusts, as `ssl_context` trusts them: the platform's store
    (on Linux OpenSSL's default file or folder, SSL_CERT_FILE / SSL_CERT_DIR honoured; certifi's bundle where
    there is none, and on macOS and Windows, whose stores are not files) and `ca_file`'s."""
    import certifi

    pem = b""
    paths = ssl.get_default_verify_paths()
    if sys.platform not in ("darwin", "win32"):
        if paths.cafile is not None:
            pem = Path(paths.cafile).read_bytes()
        # the folder's hashed links repeat the default file; one named by SSL_CERT_DIR is read as well
        folder = os.environ.get(paths.openssl_capath_env) or (paths.capath if paths.cafile is None else None)
        if folder and Path(folder).is_dir():
            found = (entry.read_bytes() for entry in sorted(Path(folder).iterdir()) if entry.is_file())
            pem += b"\n" + b"\n".join(text for text in found if b"BEGIN CERTIFICATE" in text)
    if b"BEGIN CERTIFICATE" not in pem:
        pem = Path(certifi.where()).read_bytes()
    if ca_file is not None:
        pem += b"\n" + Path(readable(ca_file, "ca_file")).read_bytes()
    return pem


class TlsError(InfraError):
    """A `tls:` block naming files that cannot be read or used (exit 3, one line)."""


@functools.cache
def _context(key: str) -> ssl.SSLContext | bool:
    spec = TlsSpec.model_validate_json(key)
    if not spec.verify:
        # once per distinct block and process: every run that uses it says so
        sys.stderr.write(f"warning: {VERIFY_OFF_WARNING.format(what='a tls: block with verify: false')}\n")
    if not spec.verify and spec.cert_file is None:
        return False
    context = ssl.create_default_context() if sys.platform not in ("darwin", "win32") else _fresh_platform()
    if not spec.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        if spec.ca_file is not None:
            context.load_verify_locations(cafile=readable(spec.ca_file, "ca_file"))
        if spec.cert_file is not None and spec.key_file is not None:
            context.load_cert_chain(readable(spec.cert_file, "cert_file"), readable(spec.key_file, "key_file"))
    except ssl.SSLError as exc:
        raise TlsError(f"tls: cannot load the certificates: {exc.reason or exc}") from None
    return context


def _fresh_platform() -> ssl.SSLContext:
    import truststore

    context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return context


def readable(name: str, key: str) -> str:
    """The path of `tls.<key>`'s file, or TlsError naming it."""
    path = Path(name).expanduser()
    if not path.is_file():
        raise TlsError(f"tls.{key}: no such file: {name}")
    return str(path)


def tls_reason(exc: BaseException) -> str | None:
    """One line for a TLS failure somewhere in `exc`'s chain (the reason in words a user acts on), or None."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        # aiohttp's connector errors subclass ssl's and keep the original apart (`certificate_error`, `os_error`)
        wrapped = getattr(seen, "certificate_error", None) or getattr(seen, "os_error", None)
        if isinstance(wrapped, ssl.SSLError | ssl.CertificateError):
            seen = wrapped
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"TLS: {_verify_words(seen)} ({seen.verify_message})"
        if isinstance(seen, ssl.SSLError):
            reason = seen.reason or seen.strerror or str(seen)
            if reason == "WRONG_VERSION_NUMBER":  # OpenSSL's word for an answer that is no TLS record at all
                return ("TLS handshake failed: the server answered without TLS (plain HTTP on that port?): is the "
                        f"url's scheme http:// or ws://? ({reason})")
            return f"TLS handshake failed: {reason}"
        seen = seen.__cause__ or seen.__context__
    return None


PLAIN_TO_TLS = ("the server closed the connection without answering, and it speaks TLS on that port: is the url's "
                "scheme https:// (or wss://)?")
"""What a plain-HTTP request to a TLS port met: a TLS server (uvicorn's, aiohttp's, Python's `ssl`) closes a
connection whose first bytes are no handshake, without a word (nginx answers 400, which is read as one)."""


async def speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether a TLS handshake with host:port completes, no certificate checked: asked only of a server that closed
    a plain-HTTP request unanswered, so "the agent failed" is not said of an http:// url naming a TLS port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port, ssl=context)
    except (OSError, TimeoutError, ssl.SSLError):
        return False
    writer.close()
    with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
        async with asyncio.timeout(timeout):  # a TLS close waits for the peer's: bounded like the handshake
            await writer.wait_closed()
    return True


def _verify_words(exc: ssl.SSLCertVerificationError) -> str:
    message = (exc.verify_message or "").lower()
    if "hostname mismatch" in message or "ip address mismatch" in message:
        return "the certificate is for another host"
    if "expired" in message:
        return "the certificate has expired"
    if "not yet valid" in message:
        return "the certificate is not yet valid"
    if "self-signed" in message or "self signed" in message or "issuer" in message:
        return "the certificate's CA is not trusted (give it with tls.ca_file or SSL_CERT_FILE)"
    return "the certificate was refused"
