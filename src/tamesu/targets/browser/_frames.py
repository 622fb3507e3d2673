"""The page's iframes: the one a selector names (`chat.frame`, a step's `frame`), and what they hold for the models
that look at the page: an aria snapshot or the text of the page's own document holds none of it (`- iframe`), so a
judge asked about an embedded widget or form said it was not there, and the browser agent never saw it."""

from __future__ import annotations

from typing import Literal

from playwright.async_api import Frame, Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tamesu.targets.browser._browser import _first_line


class NoFrame(Exception):
    """The selector names no iframe: what is wrong with it (`is not an iframe`), for the caller to say whose."""


async def find_frame(page: Page, selector: str, timeout_ms: float) -> Frame:
    """The document of the one iframe `selector` names (from any origin), waited for up to `timeout_ms`."""
    frames = page.locator(selector)
    try:
        await frames.first.wait_for(state="attached", timeout=timeout_ms)
    except PlaywrightTimeout:
        raise NoFrame(f"is not in the page within {timeout_ms / 1000:g}s") from None
    if (count := await frames.count()) > 1:
        raise NoFrame(f"matches {count} elements")
    handle = await frames.element_handle(timeout=timeout_ms)
    frame = await handle.content_frame()
    if frame is None:
        raise NoFrame("is not an iframe")
    return frame


async def iframe_hint(page: Page, advice: str) -> str:
    """` (the page has 2 iframes: ADVICE)` when the page has any, else "": what a selector that found nothing
    may have missed."""
    count = await page.locator("iframe").count()
    return f" (the page has {count} iframe{'s' if count > 1 else ''}: {advice})" if count else ""


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
            # "the steps": the browser agent's own actions, which have no frame (the words are part of its prompt)
            parts.append(f"inside the iframe {frame.url} (the steps' selectors do not reach into it):\n{content}")
    return "\n".join(parts)
