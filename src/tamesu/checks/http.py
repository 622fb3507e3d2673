"""`http`: one real request made after the conversation, to check the state of your backend.

`http: "{{vars.admin_url}}/health"` expects a 2xx; the mapping form adds the request (`method`, `headers`,
`body`, `timeout`) and what the answer must be (`status`, `contains` on the body text, `json_path` on the body
as JSON, with the comparisons of the `json_path` assertion), and `tls:` (as a target's). Every string may hold
templates. A URL that names no http(s) server is a suite problem where written. A backend that cannot be reached,
does not answer within `timeout`, answers more than `MAX_ANSWER_BYTES`, or a TLS failure (a CA not trusted,
another host's or an expired certificate), is the test's error (an InfraError, exit 3, `fault: environment`),
never the agent's failure: the backend is infrastructure the check reads, as docs/faults.md defines it, and a
check it kept from being graded says nothing of the agent.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import Field, field_validator

from tamesu.checks._compare import (
    StatusCodes,
    as_text,
    describe_statuses,
    expectations,
    render_expectations,
    status_allowed,
    template_failed,
)
from tamesu.checks._quote import quote
from tamesu.checks.base import Check, RunView, Verdict
from tamesu.checks.json_path import PathSpec, compile_path, find, judge
from tamesu.errors import InfraError, SuiteProblem, TemplateError
from tamesu.matching import number_text, shown
from tamesu.net.bounded import is_too_large
from tamesu.net.clients import async_client, moved, no_answer, os_reason
from tamesu.net.tls import TlsSpec, tls_reason
from tamesu.plugins import register
from tamesu.suite.hooks_spec import http_method, http_url
from tamesu.suite.schema import Duration, Strict
from tamesu.types import HttpHeaders

MAX_ANSWER_BYTES = 16_000_000
"""An answer is read whole to be checked, so at most this much of one is."""


class HttpSpec(Strict):
    url: str = Field(min_length=1)
    method: str = "GET"
    headers: HttpHeaders = Field(default_factory=dict)
    body: Any = None
    """A mapping or list is sent as JSON; a string as it is."""
    timeout: Duration = Field(30.0, gt=0)
    status: StatusCodes = Field(default_factory=lambda: list[int | str](["2xx"]), min_length=1)
    json_path: PathSpec | None = None
    contains: str | list[str] | None = None
    tls: TlsSpec | None = None
    """Trust and a client certificate for an HTTPS backend, as a target's `tls:` block (`tamesu.net.tls`)."""

    @field_validator("url")
    @classmethod
    def _whole(cls, value: str) -> str:
        return http_url(value)

    @field_validator("json_path", mode="before")
    @classmethod
    def _path_alone(cls, value: object) -> object:
        # As for the json_path assertion, a bare path means "it exists".
        return {"path": value} if isinstance(value, str) else value

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        return http_method(value)


class _Request:
    """The spec with every template filled, ready to send."""

    def __init__(self, spec: HttpSpec, run: RunView) -> None:
        context = run.context
        self.url = context.render_url(spec.url)
        self.headers = {name: context.render_text(value) for name, value in spec.headers.items()}
        self.body = context.render_value(spec.body)
        needles = [spec.contains] if isinstance(spec.contains, str) else spec.contains or []
        self.contains = [context.render_text(n) for n in needles]
        self.path_text = context.render_text(spec.json_path.path) if spec.json_path else ""
        self.path_expected = (
            render_expectations(context, expectations(spec.json_path)) if spec.json_path else {}
        )

    def content(self) -> dict[str, Any]:
        if self.body is None:
            return {}
        if isinstance(self.body, str):
            return {"content": self.body.encode()}
        return {"json": self.body}


@register("checks", "http")
class Http(Check[HttpSpec]):
    key = "http"
    whole_run = "your backend after the conversation"
    Spec = HttpSpec
    shorthand = "url"
    spec: HttpSpec

    async def evaluate(self, run: RunView) -> Verdict:
        try:
            request = _Request(self.spec, run)
        except TemplateError as exc:
            return template_failed(exc)
        # Headers are never shown: they are where `{{secrets.X}}` tokens go.
        label = f"{self.spec.method} {request.url}"
        try:
            async with async_client(self.spec.timeout, tls=self.spec.tls, max_bytes=MAX_ANSWER_BYTES) as client:
                response = await client.request(
                    self.spec.method, request.url, headers=request.headers, **request.content()
                )
        except httpx.TimeoutException as exc:
            # a slow backend as an unreachable one (it was the agent's failure, exit 1, while that was exit 3)
            raise InfraError(f"{label}: {no_answer(exc, number_text(self.spec.timeout))} (its timeout)") from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            # the URL the suite wrote (or a value filled into it) is none that can be requested: nothing was
            # reached, and neither the backend nor the agent is to blame
            raise SuiteProblem(f"{label}: not a URL that can be requested ({type(exc).__name__}: "
                               f"{str(exc) or 'no detail'})") from None
        except httpx.HTTPError as exc:
            raise InfraError(f"{label}: {_failed(exc)}") from None
        return self._decide(label, request, response)

    def _decide(self, label: str, request: _Request, response: httpx.Response) -> Verdict:
        allowed = self.spec.status
        if not status_allowed(allowed, response.status_code):
            return Verdict(
                passed=False,
                reason=f"{label}: expected status {describe_statuses(allowed)}, found {response.status_code}: "
                f"{quote(response.text, 120)}{moved(response)}",
            )
        missing = [n for n in request.contains if n not in response.text]
        if missing:
            return Verdict(passed=False,
                           reason=f"{label}: expected the body to contain {shown(missing[0])}, "
                           f"found {quote(response.text, 120)}")
        if self.spec.json_path is None:
            return Verdict(passed=True, reason=f"{label}: {response.status_code}")
        return _judge_json(self.spec.json_path, label, request, response)


def _failed(exc: httpx.HTTPError) -> str:
    """Why the request got no answer to check, said once: the caller's line names the assertion (`http:`, or its
    `name:`), so none of these says "http check" again (it read `http: http check: GET ...`)."""
    if is_too_large(exc):
        # read whole, a backend's endless or enormous answer held all of it in memory
        return f"the answer is larger than {MAX_ANSWER_BYTES:,} bytes, more than an http check reads"
    tls = tls_reason(exc)
    if tls is not None:
        # the suite's trust setup, not the backend's state: an infrastructure error, as for a target
        return tls
    if isinstance(exc, httpx.LocalProtocolError):  # never sent: a header the suite's values broke
        return f"cannot be sent: {exc}"
    # the backend the check asks, not the agent: the test's error (exit 3), as an unreachable target is
    if isinstance(exc, httpx.ConnectError):
        return f"could not reach it: {os_reason(exc)}"
    return f"no answer to check: {os_reason(exc)}"


def _judge_json(spec: PathSpec, label: str, request: _Request, response: httpx.Response) -> Verdict:
    try:
        path = compile_path(request.path_text)
    except ValueError as exc:  # valid as written (the plan checked it), not once a template was filled in
        raise SuiteProblem(f"{label}: the path once filled in is not one: {exc}") from None
    try:
        document = response.json()
    except ValueError:
        return Verdict(passed=False, reason=f"{label}: expected a JSON body for {request.path_text}, "
                                            f"found {quote(response.text, 120)}")
    nodes = find(path, document)
    verdict = judge(spec, request.path_text, nodes, request.path_expected, "the body")
    verdict.reason = f"{label}: {verdict.reason}"
    if not verdict.passed and not verdict.evidence:
        verdict.evidence.append(shown(as_text(document), 400))
    return verdict
