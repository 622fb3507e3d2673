"""`-n NAME`: the agent under test, by name from tamesu.yaml's `targets:` or by URL.

A URL where an A2A agent card is served (`/.well-known/agent-card.json`, or the older `agent.json`, at the
origin or under the URL's path) is an A2A target when this tamesu has one; any other URL is a rest target
with the default body (`{"message", "session_id"}`, plus `messages` when a case gives a history) whose reply
text is `$.text`.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from tamesu import targets
from tamesu.conversation import FileRef
from tamesu.errors import ConfigError, Problem
from tamesu.net.clients import async_client
from tamesu.plan import Project, load_project_targets
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import references, walk_strings
from tamesu.targets.base import TargetSpec

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
CARD_TIMEOUT = 5.0
_URL = re.compile(r"^https?://", re.IGNORECASE)
# the namespaces a target of tamesu.yaml may use in `tamesu test`: no suite vars or captures exist there
_ALLOWED_ROOTS = {"secrets", "env", "session", "message", "messages", "options", "listen", "response", "run",
                  "args", "attachments"}


class TargetProblem(Exception):
    """`-n` names nothing usable (exit 2)."""


@dataclass
class ResolvedTarget:
    name: str
    spec: TargetSpec
    about: str
    """How the header names it: `expense (rest)`."""


def is_url(name: str) -> bool:
    return bool(_URL.match(name))


async def resolve(name: str | None, project: Project, secrets: Secrets) -> tuple[ResolvedTarget, list[Problem]]:
    """The target `-n` names (None: the project's only target). Raises TargetProblem or ConfigError."""
    if name is not None and is_url(name):
        return await _from_url(name), []
    loaded, warnings = load_project_targets(project)
    if name is None:
        if len(loaded) != 1:
            known = ", ".join(loaded) or "none in tamesu.yaml"
            raise TargetProblem(f"name the agent to test with -n (a target of tamesu.yaml or a URL; targets: {known})")
        name = next(iter(loaded))
    if name not in loaded:
        known = ", ".join(loaded) or "tamesu.yaml has no targets: section"
        raise TargetProblem(f"-n {name}: no target named {name!r} (targets: {known}); or give a URL")
    _check_templates(name, project, secrets)
    spec = loaded[name]
    return ResolvedTarget(name, spec, f"{name} ({spec.type})"), warnings


def _check_templates(name: str, project: Project, secrets: Secrets) -> None:
    """A template the target cannot fill at run time is an error now, at its place in tamesu.yaml."""
    assert project.doc is not None
    problems: list[Problem] = []
    for path, text in walk_strings(project.spec.targets[name]):
        for expr, problem in references(text):
            root = expr.partition(".")[0]
            loc = ("targets", name, *path)
            if problem and root not in ("messages", "options", "attachments"):
                problems.append(project.doc.problem(loc, problem))
            elif not problem and root not in _ALLOWED_ROOTS:
                problems.append(project.doc.problem(loc, f"{{{{{expr}}}}} is not available to `tamesu test`"))
            elif root == "env" and expr.partition(".")[2] not in os.environ:
                problems.append(project.doc.problem(loc, f"environment variable {expr[4:]} is not set"))
            elif root == "secrets" and not secrets.has(expr.partition(".")[2]):
                problems.append(project.doc.problem(loc, f"secret {expr[8:]} is not set (environment or .env)"))
    if problems:
        raise ConfigError(problems)


async def _from_url(url: str) -> ResolvedTarget:
    card_at = await find_card(url)
    host = urlsplit(url).netloc
    if card_at is not None:
        if not a2a_available():
            raise TargetProblem(f"an A2A agent card is served at {card_at}, but the a2a target is not available "
                                "in this version of tamesu")
        return ResolvedTarget(host, _validated("a2a", {"type": "a2a", "url": url}), f"{url} (a2a, card {card_at})")
    return ResolvedTarget(host, _validated("rest", {"type": "rest", "url": url}), f"{url} (rest)")


def a2a_available() -> bool:
    return targets.is_implemented("a2a") and importlib.util.find_spec("tamesu.targets.a2a") is not None


def _validated(kind: str, raw: dict[str, Any]) -> TargetSpec:
    try:
        return targets.target_class(kind).Spec.model_validate(raw)
    except ValidationError as exc:
        raise TargetProblem(f"-n {raw['url']}: {exc.errors()[0]['msg']}") from None


async def find_card(url: str) -> str | None:
    """Where an agent card is served for `url`, or None (nothing there, not JSON, not a card)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    base = f"{origin}{parts.path}".rstrip("/")
    places = [origin + p for p in CARD_PATHS] + ([base + p for p in CARD_PATHS] if base != origin else [])
    async with async_client(CARD_TIMEOUT) as http:
        for place in places:
            try:
                answer = await http.get(place, headers={"Accept": "application/json"})
            except httpx.HTTPError:
                return None  # nothing answers there at all: the run itself will say so
            if answer.status_code != 200:
                continue
            try:
                card = answer.json()
            except ValueError:
                continue
            if isinstance(card, dict) and "name" in card and \
                    any(k in card for k in ("url", "supportedInterfaces", "additionalInterfaces", "skills")):
                return place
    return None


def file_refusal(resolved: ResolvedTarget, project: Project,
                 connector: str | None = None) -> Callable[[FileRef, str | None], str | None]:
    """Why the agent under test cannot get a file of a case (whose own connector is the second argument;
    `-c`, `connector`, wins over it), for the parser to refuse that case when it loads."""
    cls = targets.target_class(resolved.spec.type)

    def refuse(file: FileRef, case_connector: str | None) -> str | None:
        spec = resolved.spec
        model = connector or case_connector
        if model is not None and spec.type == "model":
            spec = spec.model_copy(update={"model": model})
        reason = cls.file_refusal(spec, file, project.spec.models)
        return f"the agent under test ({resolved.about}) cannot get this file: {reason}" if reason else None

    return refuse
