"""The documentation site: `mkdocs build --strict` passes (no broken link, no page left out of the nav, every
generated table generated), and the built site, served on 127.0.0.1, works in Debian's Chromium: the navigation
reaches every page, search finds a key, code blocks are highlighted with a copy button, nothing is requested
from another host, and the home page looks like a page of the theme (a screenshot, checked)."""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from browser_fixtures import OWN_CHROMIUM, skip_without_browser
from cdp import chromium_binary

# not the browser lane (tests/conftest.py): the module starts its own Chromium, none of the shared one's, and its
# 24 s (a CI run's) on the browser lane were the last of `make test`, that lane being its tail; in the group of the
# tests that start their own, it runs beside the lanes, niced, as ungrouped tests do, the site built once for it
pytestmark = [pytest.mark.browser, OWN_CHROMIUM]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Material's default indigo header (`primary: indigo` in mkdocs.yml): the theme's CSS reached the page
INDIGO = (0x40, 0x51, 0xB5)


def _nav_pages(entries: list[object]) -> Iterator[str]:
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from _nav_pages(value)
        else:
            yield str(value)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return out


def test_every_page_of_docs_is_in_the_nav_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    in_nav = list(_nav_pages(config["nav"]))
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(in_nav) == on_disk
    assert len(in_nav) == len(set(in_nav))


def test_the_site_builds_strict_with_generated_tables_and_schemas(site: Path) -> None:
    rest = (site / "targets" / "rest" / "index.html").read_text()
    # the key table came from RestSpec: a nested key and its default
    assert "response.listen.idle" in rest and "<code>$.text</code>" in rest
    cli = (site / "cli" / "index.html").read_text()
    assert "tamesu run" in cli and "--fail-fast" in cli and "tamesu store migrate" in cli
    assert (site / "schema" / "suite.schema.json").is_file() and (site / "schema" / "project.schema.json").is_file()
    # no marker was left behind unexpanded, and no page asks Google for fonts
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "tamesu:keys" not in text or page.parent.name == "contributing", page
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def page(served: str) -> Iterator[object]:
    skip_without_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_binary(), args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        tab = context.new_page()
        tab.set_default_timeout(15000)
        requests: list[str] = []
        tab.on("request", lambda r: requests.append(r.url))
        tab.requests = requests  # type: ignore[attr-defined]
        yield tab
        context.close()
        browser.close()


def _title(tab: object) -> str:
    # the heading's text without the permalink anchor the toc extension appends
    return str(tab.locator("article h1").inner_text()).rstrip("¶").strip()  # type: ignore[attr-defined]


def test_the_navigation_reaches_every_page(page: object, served: str) -> None:
    tab = page  # a playwright Page
    tab.goto(served)  # type: ignore[attr-defined]
    links = tab.eval_on_selector_all(  # type: ignore[attr-defined]
        "nav.md-nav--primary a.md-nav__link[href]", "els => [...new Set(els.map(e => e.href))]")
    pages = {link.split("#")[0] for link in links if link.startswith(served)}
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert len(pages) == len(list(_nav_pages(config["nav"])))
    # each page as the server sends it, in a context with scripts off: what is checked (the page came, with one
    # heading) is in the HTML, and the theme's scripts are the other tests' (search, copy buttons, the look).
    # With them on, every page ran the theme's bundle and fetched and built the whole site's search index in a web
    # worker (1 MB): 1.05 of the 1.4 s each of the 38 pages took at load 17 until the index was refused here; the
    # bundle alone still took about half of what was left (26.5 s in a CI run; at load 18, 29 s against 15 s off)
    browser = tab.context.browser  # type: ignore[attr-defined]
    bare = browser.new_context(java_script_enabled=False)
    try:
        reader = bare.new_page()
        for url in sorted(pages):
            response = reader.goto(url)
            assert response is not None and response.status == 200, url
            assert reader.locator("article h1").count() == 1, url
    finally:
        bare.close()
    # a link between pages works from the page itself, not only from the sidebar
    tab.goto(served)  # type: ignore[attr-defined]
    tab.locator("article a", has_text="Getting started").first.click()  # type: ignore[attr-defined]
    tab.wait_for_url("**/getting-started/")  # type: ignore[attr-defined]
    assert _title(tab) == "Getting started"


def test_search_finds_a_key_of_a_target(page: object, served: str) -> None:
    tab = page
    tab.goto(served + "concepts/")  # type: ignore[attr-defined]
    # the index is built in a web worker from search_index.json: a query typed before it is ready finds nothing
    tab.wait_for_load_state("networkidle")  # type: ignore[attr-defined]
    field = tab.locator("input.md-search__input")  # type: ignore[attr-defined]
    field.click()
    field.press_sequentially("max_tool_rounds", delay=20)
    results = tab.locator(".md-search-result__item")  # type: ignore[attr-defined]
    results.first.wait_for(timeout=30000)
    found = " ".join(results.all_inner_texts())
    assert "model" in found.lower()
    hrefs = tab.eval_on_selector_all(  # type: ignore[attr-defined]
        ".md-search-result__item a", "els => els.map(e => e.href)")
    assert any("/targets/model/" in h for h in hrefs), hrefs


def test_code_blocks_are_highlighted_with_a_copy_button(page: object, served: str) -> None:
    tab = page
    tab.goto(served + "targets/rest/")  # type: ignore[attr-defined]
    block = tab.locator("div.highlight pre").first  # type: ignore[attr-defined]
    assert "type: rest" in block.inner_text()
    # YAML keys carry Pygments' name-tag class: highlighted, not plain text
    assert block.locator("span.nt").count() > 3
    # the theme's script adds a copy button to each block once it has run (9.8: md-code__button, copy)
    copy = 'div.highlight button[data-md-type="copy"], div.highlight button.md-clipboard'
    tab.locator(copy).first.wait_for(state="attached")  # type: ignore[attr-defined]
    blocks = tab.locator("div.highlight pre").count()  # type: ignore[attr-defined]
    assert tab.locator(copy).count() == blocks  # type: ignore[attr-defined]


def test_nothing_is_requested_from_another_host(page: object, served: str) -> None:
    tab = page
    tab.goto(served + "personas/")  # type: ignore[attr-defined]
    tab.wait_for_load_state("networkidle")  # type: ignore[attr-defined]
    hosts = {urlsplit(u).hostname for u in tab.requests if urlsplit(u).scheme in ("http", "https")}  # type: ignore[attr-defined]
    assert hosts == {"127.0.0.1"}


def test_a_screenshot_of_the_home_page(page: object, served: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    from PIL import Image

    tab = page
    tab.goto(served)  # type: ignore[attr-defined]
    tab.wait_for_load_state("networkidle")  # type: ignore[attr-defined]
    shot = Path(os.environ.get("TAMESU_DOCS_SCREENSHOT", tmp_path_factory.mktemp("shot") / "home.png"))
    tab.screenshot(path=str(shot))  # type: ignore[attr-defined]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 860)
    header = image.getpixel((image.width // 2, 10))
    assert all(abs(a - b) <= 8 for a, b in zip(header, INDIGO, strict=True)), header
    body = image.crop((400, 200, 1200, 700))
    colours = len(body.getcolors(maxcolors=1 << 20) or [])
    assert colours > 20, "the page's body is blank"  # text and code rendered, not an empty page
    assert _title(tab) == "tamesu"
    assert tab.locator("article div.highlight").count() >= 2  # type: ignore[attr-defined]


def test_the_readme_links_name_files_of_the_repository() -> None:
    # the README is the front page on GitHub, outside the site: its links are checked here instead
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"(?<!!)\[[^\]\n]+\]\(([^)\s#]+)(?:#[^)\s]*)?\)", readme)
    local = [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]
    assert local
    assert [t for t in local if not (ROOT / t).exists()] == []
