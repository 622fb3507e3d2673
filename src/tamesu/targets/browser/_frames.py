"""What the page's iframes hold, for the models that look at the page: an aria snapshot or the text of the page's
own document holds none of it (`- iframe`), so a judge asked about an embedded widget or form said it was not
there, and the browser agent never saw it."""

from __future__ import annotations

from typing import Literal

from playwright.async_api import Page

from tamesu.targets.browser._browser import _first_line


async def inside_frames(page: Page, what: Literal["aria", "text"], timeout_ms: float) -> str:
    """Each iframe's aria snapshot or text (nested ones too), under a line naming it; "" when there is none."""
    parts = []
    for frame in page.frames:
        if frame == page.main_frame or frame.is_detached():
            continue
        body = frame.locator("body")
        try:
            content = await (body.aria_snapshot(timeout=timeout_ms) if what == "aria" else
                             body.inner_text(timeout=timeout_ms))
        except Exception as exc:  # a frame that navigates or goes away while it is read
            if page.is_closed():
                raise
            content = f"(it could not be read: {_first_line(exc)})"
        if content.strip():
            parts.append(f"inside the iframe {frame.url} (the steps' selectors do not reach into it):\n{content}")
    return "\n".join(parts)
