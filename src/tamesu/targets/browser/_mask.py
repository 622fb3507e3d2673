"""Secrets masked in the browser's own artifacts: the HAR and the Playwright trace; and a `user:password@` written
in a URL (Chromium keeps it in every request URL of the page), a credential whether or not it was declared a secret.

The trace keeps every response body as `resources/<sha1>.<ext>`, named after its content type (`.css`, `.xml`,
`.js`, `.svg`, `.dat`...): an allow-list of extensions left a stylesheet or an XML answer holding a token as it
came. Every entry is masked unless its bytes are a picture, which text masking cannot clean and would corrupt
(screenshots and screencast frames: a limit docs/reliability.md states)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tamesu.conversation import Session
from tamesu.net.urls import userinfo_hidden

_PICTURES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"RIFF", b"wOFF", b"wOF2")
"""JPEG, PNG, GIF, WebP (RIFF), WOFF fonts: binary formats whose bytes are not text."""


def mask_artifacts(session: Session) -> None:
    """The HAR and the trace hold request URLs, headers and bodies: mask the run's secrets in them."""
    har = session.artifacts_dir / "network.har"
    if har.is_file():
        text = har.read_text(encoding="utf-8", errors="surrogateescape")
        masked = userinfo_hidden(session.redactor.text(text))
        if masked != text:
            har.write_text(masked, encoding="utf-8", errors="surrogateescape")
    trace = session.artifacts_dir / "trace.zip"
    if trace.is_file():
        _mask_zip(trace, session)


def _mask_zip(path: Path, session: Session) -> None:
    with zipfile.ZipFile(path) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    changed = False
    rewritten = []
    for info, data in entries:
        if not info.is_dir() and not data.startswith(_PICTURES):
            # bytes that are not UTF-8 come back as they were; only the secrets' forms change
            text = data.decode("utf-8", errors="surrogateescape")
            masked = userinfo_hidden(session.redactor.text(text))
            if masked != text:
                data, changed = masked.encode("utf-8", errors="surrogateescape"), True
        rewritten.append((info, data))
    if changed:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
            for info, data in rewritten:
                target.writestr(info, data)
