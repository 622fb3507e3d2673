"""An inbound call's `trigger`: the HTTP request or the command that makes the agent call tamesu."""

from __future__ import annotations

import asyncio
import os

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.matching import one_line
from tamesu.targets.sip.spec import SipSpec
from tamesu.telemetry.traceparent import with_traceparent


def trigger_env(session: Session) -> dict[str, str] | None:
    """The trigger command's environment: tamesu's, with the conversation's TRACEPARENT (the variable
    OpenTelemetry's environment carrier names)."""
    trace = session.conversation_trace
    return {**os.environ, "TRACEPARENT": trace.traceparent} if trace is not None else None


async def run_trigger(what: str, spec: SipSpec, session: Session, uri: str) -> None:
    """Make the agent call `uri`; a trigger that fails or takes longer than its timeout is an InfraError."""
    trigger = spec.trigger
    assert trigger is not None
    session.event("sip_trigger", uri=uri)
    if session.conversation_trace is not None:  # the agent's INVITE is its own: the trigger carries the trace
        session.event("conversation_trace", trace_id=session.conversation_trace.trace_id,
                      sent_in=["trigger command TRACEPARENT" if trigger.run is not None
                               else "trigger request header traceparent"])
    context = session.with_captures()
    if trigger.run is not None:
        command = context.render_text(trigger.run)
        process = await asyncio.create_subprocess_shell(command, stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.PIPE, env=trigger_env(session))
        try:
            async with asyncio.timeout(trigger.timeout):
                _, err = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            raise InfraError(f"{what}: the trigger command took longer than {trigger.timeout:g}s") from None
        if process.returncode != 0:
            raise InfraError(f"{what}: the trigger command exited {process.returncode}: "
                             f"{session.redactor.text(err.decode(errors='replace').strip())[:200]}")
        return
    import httpx

    from tamesu.net.clients import async_client  # aiohttp beneath, as every HTTP route (tamesu.net.aio)

    rendered = context.render_value(dict(trigger.http or {}))
    body = rendered.get("body")
    try:
        async with async_client(trigger.timeout, tls=spec.tls) as client:
            answer = await client.request(str(rendered.get("method", "POST")), str(rendered["url"]),
                                          headers=with_traceparent(rendered.get("headers") or {},
                                                                   session.conversation_trace),
                                          **({"json": body} if body is not None else {}))
    except httpx.HTTPError as exc:
        from tamesu.net.clients import os_reason

        where = session.redactor.text(str(rendered["url"]))
        raise InfraError(f"{what}: the trigger request to {where} failed: {os_reason(exc)}") from None
    if answer.status_code >= 400:
        # which request, and what the server said of it: the status alone sent one to read the agent's logs
        where = session.redactor.text(str(rendered["url"]))
        # cut at a word with …, before the masking: a secret the cut falls in is dropped, or masked by its head
        # (the masking knows a secret cut short at an ellipsis); cut bare at 200, its first characters were said
        said = one_line(answer.text, 200)
        raise InfraError(f"{what}: the trigger request to {where} answered HTTP {answer.status_code}"
                         + (f": {session.redactor.text(said)}" if said else ""))
