"""`{{namespace.name}}` templates: parsing for validation, rendering at run time."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from tamesu.errors import TemplateError
from tamesu.types import FilledText

TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)((?:\{\{[^{}]*\}\}|[^/?#@{])*)(?=@)")
"""A URL's scheme and its `user:password`, templates in it whole (a template's value is not yet known)."""
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")
_PART = re.compile(r"[A-Za-z0-9_-]+")


def is_name_part(name: str) -> bool:
    """Whether `name` can be one part of a template's dotted name (`{{remote.NAME.url}}`): letters, digits, `_`
    and `-`; a dot would split it, a space or any other character is no template."""
    return _PART.fullmatch(name) is not None

# Namespaces and what they hold; bare names (`message`, `session`) are values of their own.
KNOWN_ROOTS = {
    "secrets": "an environment variable or a .env entry, masked in everything tamesu writes",
    "env": "an environment variable that is not secret (shown as is)",
    "vars": "a value of the test, its case or its suite",
    "captured": "a value captured from an agent turn",
    "session": "the session id, or a value captured by session.open",
    "message": "the user message of this turn",
    "attachments": "the files of this turn (rest request bodies): name, media_type, data (base64) or url",
    "messages": "the conversation so far and this turn as [{role, content}] (rest request bodies, for an agent "
                "that keeps no history of its own)",
    "ui_messages": "the same conversation as the Vercel AI SDK's UI messages, [{id, role, parts}], each answer "
                   "with the parts useChat keeps (rest request bodies, for an AI SDK chat route)",
    "remote": "a remote agent of the suite",
    "listen": "the URL of the API tamesu serves for the agent",
    "response": "the JSON the send request answered",
    "run": "the run's id and number",
    "args": "the arguments of the tool call being answered (model target tools)",
    "trace": "the W3C trace of this turn (rest request bodies), or of the conversation (voice messages): "
             "trace.traceparent, trace.id",
}


_HOOKS = ("; a hook passes no value to the run: a token the target needs is minted by its session.open "
          "({{session.NAME}}), or read when tamesu starts (TOKEN=$(./get-token.sh) tamesu run: {{secrets.TOKEN}})")
"""What a user reaching for a hook's output (`{{hooks.token}}`) is told to write instead."""


TURN_ROOTS = ("messages", "ui_messages", "attachments")
"""What only a target's request has, while a turn is being sent: never a test's script or assertion."""


def references(text: str) -> Iterator[tuple[str, str]]:
    """Yield (expression, problem) for every template in `text`; problem is empty when well-formed."""
    opened = text.count("{{")
    found = 0
    for match in TEMPLATE.finditer(text):
        found += 1
        expr = match.group(1)
        if not NAME.match(expr):
            yield expr, f"bad template {{{{{expr}}}}}: expected a name such as vars.city"
            continue
        root = expr.split(".", 1)[0]
        if root not in KNOWN_ROOTS:
            known = ", ".join(sorted(KNOWN_ROOTS))
            hint = _HOOKS if root in ("hooks", "hook") else ""
            yield expr, f"bad template {{{{{expr}}}}}: unknown namespace {root!r} (one of {known}){hint}"
            continue
        yield expr, ""
    if opened > found:
        yield "", "bad template: '{{' without a matching '}}'"


def walk_strings(value: object, path: tuple[object, ...] = ()) -> Iterator[tuple[tuple[object, ...], str]]:
    """Every string inside a JSON-like value, with its path, depth first in order.

    One generator with a stack of what is left: nested generators (`yield from` per level) resumed every level
    for every string, and the walk runs over each test and its target when the plan is checked and masked."""
    pending: list[tuple[tuple[object, ...], object]] = [(path, value)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict | Mapping):  # a dict first: the ABC check is a call of its own
            pending.extend(reversed([((*path, key), item) for key, item in value.items()]))
        elif isinstance(value, list | tuple):
            pending.extend(reversed([((*path, index), item) for index, item in enumerate(value)]))


def may_hold(value: object, needle: str) -> bool:
    """False only when no string `walk_strings` finds in `value` (plain data as read from a suite: dicts, lists,
    tuples, scalars) contains `needle`: a search of its repr, where strings show as written but for quotes,
    backslashes and unprintable characters. One call where the walk was some ten a value; the plan asks it of
    every test and its target, and nearly all of them hold no template."""
    if isinstance(value, str):
        return needle in value
    return needle in repr(value)


Resolver = Callable[[str], Any]


class Environ(Mapping[str, str]):
    """`{{env.X}}`'s namespace for one run: the environment as it is when a template of the run first reads it,
    kept from then on. Copied there and not when the run starts: most runs name no `env.` at all, and copying
    every variable (each one decoded by `os.environ`) was some forty calls a test on a short environment."""

    def __init__(self) -> None:
        self._copy: dict[str, str] | None = None

    def _values(self) -> dict[str, str]:
        if self._copy is None:
            self._copy = dict(os.environ)
        return self._copy

    def __getitem__(self, name: str) -> str:
        return self._values()[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())


class Context:
    """The values templates may name at one moment of a run.

    Each namespace is a mapping or a resolver; a bare root (such as `message`) is a plain value.
    """

    def __init__(self, **namespaces: object) -> None:
        self._namespaces: dict[str, object] = dict(namespaces)

    def child(self, **namespaces: object) -> Context:
        merged = dict(self._namespaces)
        merged.update(namespaces)
        return Context(**merged)

    def given(self, root: str) -> object:
        """The namespace `root` as it was given (its vars not rendered), or None."""
        return self._namespaces.get(root)

    def lookup(self, expr: str) -> Any:
        root, _, rest = expr.partition(".")
        if root not in self._namespaces:
            raise TemplateError(f"{{{{{expr}}}}} is not available here")
        value = self._namespaces[root]
        if not rest:
            if isinstance(value, Mapping) and "" in value:
                return value[""]
            if isinstance(value, Mapping) or callable(value):
                raise TemplateError(f"{{{{{expr}}}}} needs a name after {root}.")
            return value
        if callable(value) and not isinstance(value, Mapping):
            return value(rest)
        for part in rest.split("."):
            if isinstance(value, Mapping) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise TemplateError(f"{{{{{expr}}}}} has no value", expr)
        if root == "vars" and any("{{" in text for _, text in walk_strings(value)):
            # a var holding `{{secrets.X}}` or `{{env.X}}` (its vars are put in already): rendered here too, as in a
            # test's steps; a target's header `Bearer {{vars.token}}` went out as `Bearer {{secrets.TOKEN}}`
            return Context(**{name: space for name, space in self._namespaces.items() if name != "vars"}
                           ).render_value(value)
        return value

    def render(self, text: str) -> Any:
        """Render one string. A string that is exactly one template keeps the value's type."""
        whole = TEMPLATE.fullmatch(text.strip()) if "{{" in text else None
        if whole:
            return self.lookup(whole.group(1))
        if "{{" not in text:
            return text

        def substitute(match: re.Match[str]) -> str:
            value = self.lookup(match.group(1))
            if isinstance(value, str):
                return value
            return json.dumps(value, ensure_ascii=False)

        return TEMPLATE.sub(substitute, text)

    def render_text(self, text: str) -> str:
        value = self.render(text)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def render_url(self, text: str) -> str:
        """`text`, a URL, rendered with each template in its `user:password@` percent-encoded: written as is, a
        password holding `/`, `?`, `#` or `@` ended the host early, and the URL's error quoted its head
        (`Invalid port: 'S3cr3t+'`, an internal error). The client decodes it again for basic auth."""
        written = _USERINFO.match(text) if "{{" in text else None
        if written is None or "{{" not in written.group(2):
            return self.render_text(text)

        def encoded(match: re.Match[str]) -> str:
            value = self.lookup(match.group(1))
            return quote(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), safe="")

        return self.render_text(written.group(1) + TEMPLATE.sub(encoded, written.group(2)) + text[written.end(2):])

    def render_value(self, value: object) -> Any:
        """Render every string inside a JSON-like value."""
        if isinstance(value, str):
            return self.render(value)
        if isinstance(value, Mapping):
            return {key: self.render_value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.render_value(item) for item in value]
        return value


def resolve_vars(variables: Mapping[str, object]) -> tuple[dict[str, object], dict[str, str]]:
    """The vars with every `{{vars.X}}` inside them put in, at any depth, and what is wrong with those that name
    a var that does not exist or, through others, themselves (kept as written). A value that is exactly one
    template keeps the named value's type; any other namespace waits for the run."""
    if not may_hold(variables, "{{"):
        return dict(variables), {}
    resolved: dict[str, object] = {}
    wrong: dict[str, str] = {}

    def var(name: str, chain: tuple[str, ...]) -> object:
        if name not in resolved:
            if name in chain:
                loop = " -> ".join(f"vars.{n}" for n in (*chain[chain.index(name):], name))
                raise TemplateError(f"the vars name each other in a loop ({loop})")
            try:
                resolved[name] = value(variables[name], (*chain, name))
            except TemplateError as exc:
                # said by the var that has the template, once: the vars naming it are kept as written
                if not isinstance(exc, _Said):
                    wrong[name] = str(exc)
                resolved[name] = variables[name]
                raise _Said(name) from None
        return resolved[name]

    def lookup(expr: str, chain: tuple[str, ...]) -> object:
        _, _, rest = expr.partition(".")
        name, _, path = rest.partition(".")
        if name not in variables:
            raise TemplateError(f"bad template {{{{{expr}}}}}: no var {name!r} in the test, its cases, the suite "
                                "or the project")
        found = var(name, chain)
        return Context(vars={name: found}).lookup(f"vars.{name}.{path}") if path else found

    def value(item: object, chain: tuple[str, ...]) -> object:
        if isinstance(item, Mapping):
            return {key: value(inner, chain) for key, inner in item.items()}
        if isinstance(item, list):
            return [value(inner, chain) for inner in item]
        if not isinstance(item, str) or "{{" not in item:
            return item
        whole = TEMPLATE.fullmatch(item.strip())
        if whole and whole.group(1).startswith("vars."):
            return lookup(whole.group(1), chain)

        def substitute(match: re.Match[str]) -> str:
            if not match.group(1).startswith("vars."):
                return match.group(0)
            found = lookup(match.group(1), chain)
            return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

        return TEMPLATE.sub(substitute, item)

    for name in variables:
        with contextlib.suppress(_Said):
            var(name, ())
    return resolved, wrong


class _Said(TemplateError):
    """A var's problem, already said where it is."""


def render_partial(value: object, known: Mapping[str, object]) -> Any:
    """Render only the namespaces in `known`, leaving every other template as written.

    Used when expanding cases: `{{vars.x}}` becomes its value, `{{captured.y}}` waits for the run.
    """
    if isinstance(value, str):
        if "{{" not in value:
            return value

        def substitute(match: re.Match[str]) -> str:
            expr = match.group(1)
            root, _, rest = expr.partition(".")
            if root not in known or not rest:
                return match.group(0)
            try:
                found = Context(**{root: known[root]}).lookup(expr)
            except TemplateError:
                return match.group(0)
            return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

        rendered = TEMPLATE.sub(substitute, value)
        return rendered if rendered == value else FilledText(rendered)
    if isinstance(value, Mapping):
        return {key: render_partial(item, known) for key, item in value.items()}
    if isinstance(value, list):
        return [render_partial(item, known) for item in value]
    return value
