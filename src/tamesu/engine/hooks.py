"""Hooks: commands or HTTP requests run before and after a suite, and around every run."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import httpx

from tamesu.errors import TemplateError
from tamesu.matching import one_line
from tamesu.net.bounded import is_too_large
from tamesu.net.clients import async_client, moved, os_reason
from tamesu.net.tls import tls_reason
from tamesu.runtime.shell import run_shell
from tamesu.suite.schema import HookSpec
from tamesu.suite.templates import Context


class HookFailed(Exception):
    pass


TAIL_CHARS = 400
"""At most this much of a failing command's last lines goes into its error: the console line, every record."""
MAX_ANSWER_BYTES = 16_000_000
"""The most of an http hook's answer read (as an `http` check's): it is kept in memory to be said."""


HookGroup = tuple[Sequence[HookSpec], Path]
"""Hooks and the folder their commands run in: tamesu.yaml's in the project's, a suite's in the suite's."""


async def run_hooks(groups: Sequence[HookGroup], context: Context, stage: str) -> None:
    """Each group's hooks in order, numbered across the groups (`before_all hook 3`)."""
    numbered = [(hook, cwd) for hooks, cwd in groups for hook in hooks]
    for number, (hook, cwd) in enumerate(numbered, start=1):
        try:
            if hook.run is not None:
                await _run_command(hook, context, cwd)
            else:
                await _run_request(hook, context, _request_timeout(hook))
        except (TemplateError, ValueError) as exc:  # ValueError: a NUL byte, which no command line can hold
            raise HookFailed(f"{stage} hook {number}: {exc}") from None
        except HookFailed as exc:
            raise HookFailed(f"{stage} hook {number}: {exc}") from None


async def _run_command(hook: HookSpec, context: Context, cwd: Path) -> None:
    assert hook.run is not None
    command = context.render_text(hook.run)
    env = {**os.environ, **{k: context.render_text(v) for k, v in hook.env.items()}}
    outcome = await run_shell(command, cwd, env, hook.timeout)
    if outcome.code is None:
        raise HookFailed(f"`{command}` timed out after {hook.timeout:g}s")
    if outcome.code != 0:
        tail = " | ".join(outcome.output.strip().splitlines()[-3:])
        if len(tail) > TAIL_CHARS:  # its end says why it failed; a whole long line was each test's error line
            tail = "…" + tail[-(TAIL_CHARS - 1):]
        raise HookFailed(f"`{command}` exited with {outcome.code}" + (f": {tail}" if tail else " (no output)"))


def _request_timeout(hook: HookSpec) -> float:
    """An http hook's bound: the `timeout` written beside `http:` (as a command hook's bounds its command) or in
    it; both written, the smaller; neither, the request's default."""
    assert hook.http is not None
    if "timeout" not in hook.model_fields_set:
        return hook.http.timeout
    if "timeout" not in hook.http.model_fields_set:
        return hook.timeout
    return min(hook.timeout, hook.http.timeout)


async def _run_request(hook: HookSpec, context: Context, timeout: float) -> None:
    assert hook.http is not None
    spec = hook.http
    url = context.render_url(spec.url)
    body = context.render_value(spec.body)
    headers = {k: context.render_text(v) for k, v in spec.headers.items()}
    try:
        async with async_client(timeout, tls=spec.tls, max_bytes=MAX_ANSWER_BYTES) as client:
            response = await client.request(
                spec.method, url, headers=headers,
                **({"json": body} if body is not None and not isinstance(body, str) else
                   {"content": body} if isinstance(body, str) else {}),
            )
    except httpx.HTTPError as exc:
        if is_too_large(exc):  # an endless or enormous answer was read whole, held in memory
            raise HookFailed(f"{spec.method} {url}: the answer is larger than {MAX_ANSWER_BYTES:,} bytes, more than "
                             "a hook reads") from None
        # a TLS failure in the words a user acts on (which CA, which host), on one line
        why = os_reason(exc) if tls_reason(exc) is not None else f"{type(exc).__name__}: {exc}"
        raise HookFailed(f"{spec.method} {url}: {why}") from None
    except httpx.InvalidURL as exc:  # a URL a template made (`{{env.BASE}}/seed`) that is none: 'internal error'
        raise HookFailed(f"{spec.method} {url}: not a URL that can be sent to ({exc})") from None
    expected = spec.expect_status
    ok = (response.status_code in expected if isinstance(expected, list)
          else response.status_code == expected if expected is not None else response.is_success)
    if not ok:
        wanted = (" or ".join(map(str, expected)) if isinstance(expected, list) else str(expected)) \
            if expected is not None else "a 2xx status"
        # the backend's words say why (`{"error": "the database is locked"}`); an empty answer says nothing more
        words = one_line(response.text[:TAIL_CHARS * 4], TAIL_CHARS)
        said = f": {words}" if words else ""
        said += moved(response)
        raise HookFailed(f"{spec.method} {url} answered {response.status_code}, expected {wanted}{said}")
