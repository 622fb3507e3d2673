"""What the browser target's tests share: the web shop example served once, one Chromium for the whole test
session (tamesu attaches to it over CDP, so a test pays no browser start), and a look at Chromium processes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdp import chromium_binary
from lifeline import tied

ROOT = Path(__file__).resolve().parent.parent
WEB_SHOP = ROOT / "examples" / "web-shop"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--mute-audio"]


OWN_CHROMIUM = pytest.mark.xdist_group("own-chromium")
"""The group of the browser tests that launch a Chromium of their own, none of the shared one's (the docs site,
`tamesu view`'s pages): kept off the browser lane, the tail of `make test` (tests/conftest.py's GROUPS), they run
beside the lanes, niced, as ungrouped tests do, one at a time on one worker."""


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    why = os.environ.get("TAMESU_NO_BROWSER")  # set by .ci/run when installing Chromium failed
    if chromium_binary() is None:
        return why or "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the browser extra is not installed (pip install -e '.[browser]')"
    return None


def skip_without_browser() -> None:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)


def _read_line(process: subprocess.Popen[str], pattern: str, stream: str, timeout: float) -> str:
    found: list[str] = []
    source = process.stdout if stream == "stdout" else process.stderr
    assert source is not None

    def read() -> None:
        for line in source:
            match = re.search(pattern, line)
            if match and not found:
                found.append(match.group(1))

    threading.Thread(target=read, daemon=True).start()  # keeps draining the pipe afterwards too
    deadline = time.monotonic() + timeout
    while not found and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    if not found:
        process.kill()
        raise RuntimeError(f"no line matching {pattern!r} within {timeout}s")
    return found[0]


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@contextlib.contextmanager
def served_pages(site: Path, pages: dict[str, str]) -> Iterator[str]:
    """`pages` (a file name and its text each) written under `site` and served by tests/agents/web_pages.py on a
    free port while the block runs; its base URL."""
    for name, text in pages.items():
        (site / name).write_text(text)
    server = subprocess.Popen(tied([sys.executable, "-u", str(ROOT / "tests" / "agents" / "web_pages.py"),
                                    str(site)]), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield _read_line(server, r"listening on (\S+)", "stdout", 30)
    finally:
        _stop(server)


@pytest.fixture(scope="session")
def web_shop_url() -> Iterator[str]:
    """examples/web-shop/shop.py on a free port (it starts the REST example agent behind its chat widget)."""
    skip_without_browser()
    shop = subprocess.Popen(tied([sys.executable, str(WEB_SHOP / "shop.py"), "--port", "0"]),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield _read_line(shop, r"listening on (http://\S+/)", "stdout", 30)
    finally:
        _stop(shop)


@pytest.fixture(scope="session")
def shared_chromium() -> Iterator[str]:
    """One headless Chromium for every browser test of the session; its DevTools URL for TAMESU_BROWSER_CDP_URL."""
    skip_without_browser()
    binary = chromium_binary()
    assert binary is not None
    profile = tempfile.mkdtemp(prefix="tamesu-chromium-")
    browser = subprocess.Popen(tied([binary, *LAUNCH_ARGS, "--remote-debugging-port=0",
                                     f"--user-data-dir={profile}", "about:blank"]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield _read_line(browser, r"DevTools listening on (ws://\S+)", "stderr", 30)
    finally:
        _stop(browser)
        shutil.rmtree(profile, ignore_errors=True)


def example_copy(tmp_path: Path) -> Path:
    """The web shop's suites in a scratch folder, so runs write their cache and baselines there."""
    target = tmp_path / "web-shop"
    shutil.copytree(WEB_SHOP, target, ignore=shutil.ignore_patterns("__pycache__", ".tamesu"))
    return target


# ---------------------------------------------------------------- processes


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _is_chromium(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return "chrom" in Path(command).name


def descendants(root: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid, hops = int(entry.name), 0
        parent = _parent(pid)
        while parent not in (None, 0, 1) and hops < 50:
            if parent == root:
                found.append(pid)
                break
            parent, hops = _parent(parent), hops + 1
    return found


def chromium_under(root: int) -> list[int]:
    return [pid for pid in descendants(root) if _is_chromium(pid)]


def browser_main_process(pids: list[int]) -> int | None:
    """The browser process itself (its helpers are started with --type=..., beside the crash handler), whose
    parent is no Chromium: a helper the browser has forked and not yet exec'd still has the browser's command
    line, and a watcher polling on a loaded machine saw one as a second browser (CI at -n 4)."""
    for pid in pids:
        try:
            # helpers may rewrite their argv into one string, so look at the whole command line
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        parent = _parent(pid)
        if (command and b"crashpad" not in command and b"--type=" not in command
                and not (parent and _is_chromium(parent))):
            return pid
    return None
