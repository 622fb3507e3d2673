"""What a user writes for the browser target: the target's keys, its `chat` block, and a test's `steps`.

Kept here, beside the target, so the suite schema only carries `steps` as raw mappings and this module
validates them (the loader dispatches to `parse_steps`), the same way target specs are dispatched by type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, TypeAdapter, ValidationInfo, field_validator, model_validator

from tamesu.matching import one_line, quoted
from tamesu.targets.base import TargetSpec
from tamesu.types import Duration, Strict, YamlBool, YamlFloat, YamlInt

ENGINES = ("chromium",)
"""Engines this version drives: Debian's Chromium. Firefox and WebKit builds come only from a download."""


class RoleSelector(Strict):
    """An element by its accessible role and name, as a person using a screen reader finds it."""

    role: str = Field(min_length=1)
    """The ARIA role (`button`, `textbox`, `link`...)."""
    name: str | None = None
    """The accessible name; a substring, case-insensitive, unless `exact`."""
    exact: YamlBool = False
    """Match the accessible name exactly (case and whole string)."""


Selector = str | RoleSelector
"""A CSS selector (`#q`, `a[data-id='dune']`), or `{role, name}`."""


class Viewport(Strict):
    width: YamlInt = Field(1024, ge=100, le=8000)
    """The page's width in CSS pixels."""
    height: YamlInt = Field(700, ge=100, le=8000)
    """The page's height in CSS pixels."""


class DoneSpec(Strict):
    """How to tell the agent has finished answering: an element hidden or shown, or its messages quiet."""

    hidden: Selector | None = None
    """An element (a typing indicator) that is hidden once the agent has answered."""
    visible: Selector | None = None
    """An element shown once the agent has answered: a new one under each answer, or one hidden while the agent
    works and shown again (one left shown from the last answer is not this answer's)."""
    quiet: Duration = 0.4
    """The agent's messages stopped changing for this long (always waited for, after hidden/visible)."""


class ChatSpec(Strict):
    """A web chat widget as a conversational target: type in `input`, send, read the new `messages`."""

    input: Selector
    """The text field the user's turn is typed into."""
    send: Selector | None = None
    """The send control; without it Enter is pressed in the input."""
    messages: Selector
    """Every element it matches is one of the agent's messages."""
    done: DoneSpec = Field(default_factory=DoneSpec)
    """How to tell the agent has finished its answer: an element hidden or shown, then its messages quiet."""
    open: Selector | None = None
    """A control that opens the widget (a launcher bubble), clicked once when the conversation starts; looked for
    in the page, outside `frame`."""
    frame: str | None = None
    """A CSS selector of the iframe the widget lives in (`iframe[title='Chat']`): `input`, `send`, `messages` and
    `done` are looked for in its document (from any origin)."""
    greeting: YamlBool = False
    """The widget writes first (a welcome once it is open): its messages are the agent's first turn, waited for
    up to `turn_timeout` until something is written and they are quiet for `done.quiet`."""


_PAGE_SCHEMES = ("http://", "https://", "file://", "about:", "data:")


class BrowserSpec(TargetSpec):
    url: str
    """The page the browser opens at the start of each run; templates allowed."""
    engine: str = "chromium"
    """The browser: `chromium` (Debian's, or Playwright's), the only engine this version drives (`firefox` and
    `webkit` are refused, a browser downloaded for them too)."""
    viewport: Viewport = Field(default_factory=Viewport)
    """The page's size in CSS pixels."""
    locale: str | None = None
    """The browser's locale (`de-DE`): `navigator.language` and the Accept-Language header."""
    headless: YamlBool = True
    """Run the browser without a window; `false` shows it (needs a display)."""
    storage_state: str | None = None
    """A Playwright storage-state file (cookies, local storage), relative to the suite."""
    allowed_domains: list[str] = Field(default_factory=list)
    """Hosts the page may reach (`127.0.0.1`, `*.example.com`); requests elsewhere are blocked and recorded.
    Empty: every host."""
    model: str = "browser"
    """The model under `models:` that plays tamesu's browser agent in `goal` steps."""
    vision: YamlBool = False
    """Show the models of `goal` and `expect` steps a screenshot of the page (JPEG, the viewport) with each
    look at it, beside its text and aria snapshot: for models that see images."""
    chat: ChatSpec | None = None
    """The page's chat widget as a conversational target (`input`, `messages`...); without it, the test's `steps`
    drive the page."""
    load_timeout: Duration = Field(30.0, gt=0)
    """How long the first page may take to load before the run is an infrastructure error."""
    step_timeout: Duration = Field(5.0, gt=0)
    """How long an action waits for its element (a selector that matches nothing fails after this)."""
    turn_timeout: Duration = Field(60.0, gt=0)
    """How long a chat turn (`chat:`) waits for the agent's answer in the page before it fails."""
    trace: YamlBool = True
    """Record a Playwright trace (`trace.zip`: the page's DOM before and after each action, its network) and a HAR
    (`network.har`) of every run."""
    trace_screenshots: YamlBool = False
    """With `trace`, also record the page's screencast in the trace (the film strip of `playwright show-trace`).
    Off by default: Chromium encodes a frame at every paint and tamesu's own screenshots wait behind them; the web
    shop example's suite took twice as long with it (the page after each step and chat turn is in `steps/` anyway)."""
    cdp_url: str | None = None
    """Attach to a Chromium that is already running (`http://127.0.0.1:9222`) instead of starting one."""

    def greeting_turns(self) -> int:
        return 1 if self.chat is not None and self.chat.greeting else 0

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, engine: str) -> str:
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r} is not available: this version drives chromium only "
                             "(Debian's /usr/bin/chromium, or Playwright's)")
        return engine

    @field_validator("url")
    @classmethod
    def _page(cls, url: str) -> str:
        # a page the browser can open; the rest (ftp://, `localhost:8080` read as the scheme "localhost") failed
        # each run, exit 3. A url with no scheme at all (`/shop`) is said by the plan, as for every target
        scheme = url.split(":", 1)[0] if ":" in url else ""
        if scheme and "{{" not in scheme and not url.lower().startswith(_PAGE_SCHEMES):
            raise ValueError("a browser url is the page to open: http://, https:// or file:// (or about:, data:)")
        return url

    @field_validator("allowed_domains")
    @classmethod
    def _hosts(cls, domains: list[str]) -> list[str]:
        for domain in domains:
            if not domain.strip() or "/" in domain or re.search(r":\d+$", domain):
                raise ValueError(f"{domain!r} is not a host name (write 127.0.0.1 or *.example.com, no scheme or port)")
        return domains


# ---------------------------------------------------------------- steps

ACTIONS = ("navigate", "click", "fill", "press", "wait", "screenshot", "eval_js", "assert_url", "assert_text",
           "mock", "a11y", "visual")

IMPACTS = ("minor", "moderate", "serious", "critical")

_REQUIRED: dict[str, tuple[str, ...]] = {
    "navigate": ("url",), "click": ("selector",), "fill": ("selector", "value"), "press": ("key",),
    "eval_js": ("script",), "assert_url": ("url",), "assert_text": ("text",), "mock": ("url",),
    "visual": ("name",),
}


class GoalStep(Strict):
    goal: str = Field(min_length=1)
    max_steps: YamlInt = Field(10, ge=1, le=200)
    """The browser agent's step budget: the goal fails when it is not met within this many actions."""


class ExpectStep(Strict):
    expect: str = Field(min_length=1)
    """A rubric the judge grades against the page as it is now (its text, aria snapshot and URL)."""
    model: Any = None
    """A model name under `models:` or a spec, instead of `judge`."""


class ActionStep(Strict):
    action: Literal["navigate", "click", "fill", "press", "wait", "screenshot", "eval_js", "assert_url",
                    "assert_text", "mock", "a11y", "visual"]
    """What the step does (docs/targets/browser.md says each); the keys below apply to the actions they name."""
    selector: Selector | None = None
    """The element the step acts on or looks at: a CSS selector, or `{ role, name }`; it must match one."""
    value: str | None = None
    """fill: the text typed into the element (what was there is replaced)."""
    key: str | None = None
    """press: a key as Playwright names it (`Enter`, `Tab`, `Control+A`), in `selector` or wherever the focus is."""
    url: str | None = None
    """navigate: the page to open; assert_url: the URL the page must be at, exact or a glob (`*` within a segment,
    `**` across); wait: a URL (or glob) to reach; mock: the requests to answer (a URL, or Playwright's glob)."""
    text: str | None = None
    """assert_text: words the page (or `selector`) must hold; wait: words to be shown (a substring either way,
    case-insensitive)."""
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    """screenshot: the file's name (`screenshots/NAME.png`; default `step-NN`); visual: the baseline's
    (`__visual__/NAME.png`)."""
    script: str | None = None
    """eval_js: JavaScript evaluated in the page (or `frame`); its value is the step's `$.result`."""
    frame: str | None = None
    """A CSS selector of the iframe the step works in (`iframe[title='Payment']`), as `chat.frame`: its `selector`,
    `text` or `script` is looked for in that iframe's document (from any origin)."""
    timeout: Duration | None = Field(None, gt=0)
    """Overrides the target's `step_timeout` for this step."""
    ms: YamlInt | None = Field(None, ge=0, le=600_000)
    """wait: a fixed pause (only when no selector, text or url is waited for)."""
    full_page: YamlBool = False
    """screenshot, visual: the whole page, not only the viewport (without a `selector`)."""
    # mock
    status: YamlInt = Field(200, ge=100, le=599)
    """mock: the status of the answer."""
    json_: object = Field(None, alias="json")
    """mock: a JSON body (content type `application/json`); one of json, body or file."""
    body: str | None = None
    """mock: a text body (content type `text/plain`)."""
    file: str | None = None
    """mock: a file whose bytes are the body, relative to the suite."""
    content_type: str | None = None
    """mock: the answer's Content-Type, instead of the one json or body implies."""
    method: str | None = None
    """mock: only requests with this method (`POST`); default every method."""
    # a11y
    impact: Literal["minor", "moderate", "serious", "critical"] = "serious"
    """The lowest impact of an axe violation that fails the step."""
    rules: list[str] = Field(default_factory=list)
    """Only these axe rules (ids such as `label`, `color-contrast`); empty: every rule axe has."""
    disable: list[str] = Field(default_factory=list)
    """axe rules not checked (`color-contrast`)."""
    aria: str | None = None
    """An aria snapshot (YAML) the page's `selector` (default body) must match."""
    # visual
    threshold: YamlFloat = Field(0.001, ge=0, le=1)
    """The fraction of pixels that may differ from the baseline."""
    pixel_threshold: YamlFloat = Field(0.1, ge=0, le=1)
    """How different one pixel must be to count (pixelmatch's threshold)."""

    @model_validator(mode="after")
    def _needs(self) -> ActionStep:
        missing = [key for key in _REQUIRED.get(self.action, ()) if getattr(self, key) is None]
        if missing:
            raise ValueError(f"{self.action} needs {' and '.join(missing)}")
        given = [k for k in ("json_", "body", "file") if getattr(self, k) is not None]
        if self.action == "mock" and len(given) > 1:
            raise ValueError("mock answers with one of json, body or file")
        if self.action == "wait" and self.selector is None and self.text is None and self.url is None \
                and self.ms is None:
            raise ValueError("wait needs selector, text, url or ms")
        return self

    @field_validator("frame")
    @classmethod
    def _framed(cls, frame: str | None, info: ValidationInfo) -> str | None:
        # a field validator, so the problem points at `frame`: the keys it depends on are declared before it
        action = info.data.get("action")
        if frame is not None and action is not None and not _in_a_frame(action, info.data):
            raise ValueError(f"{action} {_FRAME_USE.get(action, 'is not done inside an iframe')} (frame applies "
                             f"to {', '.join(FRAME_ACTIONS)})")
        return frame


FRAME_ACTIONS = ("click", "fill", "press", "wait", "assert_text", "screenshot", "eval_js")
"""The actions that look for something in a document, and so can look in an iframe's (`frame`)."""
_FRAME_USE = {"press": "without a selector presses the key wherever the focus is",
              "wait": "with url or ms waits for the page, not for something in the iframe",
              "screenshot": "without a selector takes the whole page"}


def _in_a_frame(action: str, keys: Mapping[str, Any]) -> bool:
    """Whether a step has something to look for in its `frame`."""
    if action in ("press", "screenshot"):
        return keys.get("selector") is not None
    if action == "wait":
        return keys.get("selector") is not None or keys.get("text") is not None
    return action in FRAME_ACTIONS


Step = GoalStep | ExpectStep | ActionStep
_KIND_KEYS = (("goal", GoalStep), ("expect", ExpectStep), ("action", ActionStep))


def step_model(raw: object) -> type[Step] | None:
    """Which kind of step a mapping is, from its one marker key; None when it names none."""
    if not isinstance(raw, dict):
        return None
    for key, model in _KIND_KEYS:
        if key in raw:
            return model
    return None


def parse_step(raw: object) -> Step:
    """One step; raises ValueError (no marker) or pydantic's ValidationError (bad keys)."""
    model = step_model(raw)
    if model is None:
        raise ValueError("a step is {goal: ...}, {expect: ...} or {action: ...} "
                         f"(actions: {', '.join(ACTIONS)})")
    return TypeAdapter(model).validate_python(raw)


def describe(step: Step) -> str:
    """A step as one short line for messages: `click '#buy'`, `goal "Find Solaris"` (a selector, a URL or a key
    as Python writes it, `'input[name="q"]'`; words in double quotes, as every line quotes words)."""
    if isinstance(step, GoalStep):
        return f"goal {quoted(step.goal, 60)}"
    if isinstance(step, ExpectStep):
        return f"expect {quoted(step.expect, 60)}"
    target = step.selector or step.url or step.name or step.key or step.text or step.script
    what = selector_text(target) if isinstance(target, RoleSelector) else _short(target) if target else ""
    return f"{step.action} {what}".strip()


def selector_text(selector: Selector | None) -> str:
    if selector is None:
        return "the page"
    if isinstance(selector, RoleSelector):
        return f"{selector.role} {selector.name!r}" if selector.name else selector.role
    return repr(selector)


def _short(text: object, limit: int = 60) -> str:
    return repr(one_line(str(text), limit))
