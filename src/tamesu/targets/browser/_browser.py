"""One Chromium per tamesu process, shared by every browser test of a run; each run gets its own context.

Starting Chromium costs about half a second and 100 MB; a context costs a few milliseconds, so runs share the
browser and never share a context (cookies, storage and routes stay per run). The browser is Debian's
`/usr/bin/chromium` (never a Playwright download), or one already running when `cdp_url` (or the
`TAMESU_BROWSER_CDP_URL` environment variable) names its DevTools endpoint. `shutdown()` closes it when the run
ends; a browser that died is noticed and a fresh one started for the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from dataclasses import dataclass, field

from playwright.async_api import Browser, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

CDP_ENV = "TAMESU_BROWSER_CDP_URL"
"""Attach every browser target to this running Chromium (tests share one browser across processes)."""
EXECUTABLE_ENV = "TAMESU_CHROMIUM"
"""The Chromium binary to start, when it is not `chromium` on the PATH."""

LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--disable-default-apps", "--mute-audio", "--metrics-recording-only"]
"""No sandbox (containers run as root), and nothing that calls home: no updates, sync or field trials."""


class BrowserUnavailable(Exception):
    """Chromium could not be found, started or reached."""


def executable() -> str | None:
    """The Chromium to start: `TAMESU_CHROMIUM`, else the first Chromium on the PATH."""
    given = os.environ.get(EXECUTABLE_ENV)
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class _Shared:
    loop: asyncio.AbstractEventLoop
    playwright: Playwright | None = None
    browsers: dict[tuple[object, ...], Browser] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_shared: _Shared | None = None


def _state() -> _Shared:
    global _shared
    loop = asyncio.get_running_loop()
    if _shared is None or _shared.loop is not loop:
        # a new event loop (another command in the same process): the old objects belong to the old loop
        _shared = _Shared(loop)
    return _shared


async def acquire(*, headless: bool, cdp_url: str | None) -> Browser:
    """The shared browser for these options, started (or attached) on first use."""
    state = _state()
    cdp_url = cdp_url or os.environ.get(CDP_ENV) or None
    key = (headless, cdp_url)
    async with state.lock:
        browser = state.browsers.get(key)
        if browser is not None and browser.is_connected():
            return browser
        state.browsers.pop(key, None)
        if state.playwright is None:
            try:
                state.playwright = await async_playwright().start()
            except Exception as exc:
                raise BrowserUnavailable(f"Playwright could not start: {exc}") from exc
        if cdp_url:
            browser = await _connect(state.playwright, cdp_url)
        else:
            browser = await _launch(state.playwright, headless)
        state.browsers[key] = browser
        return browser


async def _connect(playwright: Playwright, cdp_url: str) -> Browser:
    try:
        return await playwright.chromium.connect_over_cdp(cdp_url, timeout=10_000)
    except PlaywrightError as exc:
        raise BrowserUnavailable(f"no Chromium answers at {cdp_url}: {_first_line(exc)}") from exc


async def _launch(playwright: Playwright, headless: bool) -> Browser:
    binary = executable()
    if binary is None:
        raise BrowserUnavailable("no Chromium found: install Debian's chromium (apt-get install chromium) or set "
                                 f"{EXECUTABLE_ENV} to a Chromium binary")
    if not headless and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # Chromium would start and close at once, and Playwright say only "browser has been closed"
        raise BrowserUnavailable("headless: false needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set "
                                 "(run under xvfb-run, or leave headless on)")
    try:
        return await playwright.chromium.launch(executable_path=binary, headless=headless, args=LAUNCH_ARGS,
                                                timeout=30_000)
    except PlaywrightError as exc:
        raise BrowserUnavailable(f"{binary} did not start: {_first_line(exc)}") from exc


async def shutdown() -> None:
    """Close every browser this process started (an attached one is only disconnected) and Playwright."""
    global _shared
    state, _shared = _shared, None
    if state is None:
        return
    try:
        if asyncio.get_running_loop() is not state.loop:
            return
    except RuntimeError:
        return
    for browser in list(state.browsers.values()):
        with contextlib.suppress(PlaywrightError, TimeoutError):  # a crashed one is already gone
            await asyncio.wait_for(browser.close(), 10)
    if state.playwright is not None:
        with contextlib.suppress(PlaywrightError, TimeoutError, OSError):
            await asyncio.wait_for(state.playwright.stop(), 10)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("=", "Call log")):
            return line.removeprefix("Error: ")
    return type(exc).__name__


def _register() -> None:
    from tamesu import targets

    targets.on_shutdown(shutdown)


_register()
