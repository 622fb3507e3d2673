"""The turns whose reply comes after the send's answer: polled for (`response.poll`) or posted back to tamesu's
listener (`response.listen`). `waiting` is told what the turn waits for at each step, for the message of a turn
that times out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from tamesu.conversation import AgentTurn, TurnError
from tamesu.net.direct import Request
from tamesu.suite.templates import Context
from tamesu.targets.rest.answer import TurnReader
from tamesu.targets.rest.http import Http, excerpt
from tamesu.targets.rest.read import holds, text_of, values
from tamesu.targets.rest.request import build_poll
from tamesu.targets.rest.spec import ListenSpec, PollSpec, RestSpec

if TYPE_CHECKING:
    from tamesu.targets.rest.listen import Listener


async def poll_turn(http: Http, reader: TurnReader, request: Request, spec: RestSpec, poll: PollSpec, *,
                    context: Callable[[object], Context], waiting: Callable[[str], None],
                    mask: Callable[[str], str]) -> AgentTurn:
    """`context(answer)`: the turn's templates with `{{response.X}}` the send's JSON answer."""
    waiting("waiting for the send answer")
    sent = await http.fetch(request)
    reader.fail_on_refusal(sent)  # no agent took the send: nothing would be polled for, or posted back
    reader.fail_on_5xx(sent)
    if sent.status >= 400:
        return reader.answer_turn(sent)
    ctx = context(sent.body if isinstance(sent.body, dict) else {"": sent.body})
    poll_request = build_poll(http, poll, ctx, spec.url, {**spec.headers, **poll.headers}, sent)
    limit = poll.timeout if poll.timeout is not None else spec.turn_timeout
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    raw: list[object] = [sent.body]
    while True:
        waiting(f"polling {mask(str(poll_request.url))}, {len(raw) - 1} polls")
        answer = await http.fetch(poll_request)
        raw.append(answer.body)
        reader.fail_on_poll_answer(answer, mask(str(poll_request.url)))
        if answer.status < 400:
            text = text_of(poll.text, answer.body)
            if text or holds(poll.done, answer.body):
                turn = reader.turn(text=text, raw=raw, scan=[answer.body], status=answer.status,
                                   sent_at_ms=sent.sent_at_ms, completed_at_ms=answer.completed_at_ms)
                if not values(poll.text, answer.body):
                    reader.said_nowhere(turn, [answer.body], key="response.poll.text", path=poll.text,
                                        where="the poll's answer", set_here="text" in poll.model_fields_set,
                                        hint="set response.poll.text to the field with the reply")
                return turn
        if loop.time() + poll.interval > deadline:
            raise TurnError(f"no reply from the poll URL within {limit:g}s (last answer HTTP "
                            f"{answer.status}: {mask(excerpt(answer.body))})", raw=raw,
                            status=answer.status, limit_s=limit, events=True)
        await asyncio.sleep(poll.interval)


async def listen_turn(http: Http, reader: TurnReader, request: Request, listener: Listener, listen: ListenSpec, *,
                      waiting: Callable[[str], None]) -> AgentTurn:
    """The posts after the send (what came before it was drained by the caller), until `listen.done` or quiet."""
    waiting("waiting for the send answer")
    sent = await http.fetch(request)
    reader.fail_on_refusal(sent)  # no agent took the send: nothing would be polled for, or posted back
    reader.fail_on_5xx(sent)
    waiting(f"waiting for a post to {listener.shown()}")
    posts = await listener.posts(listen.idle, listen.done)
    return listened(reader, listen, reader.turn(status=sent.status, sent_at_ms=sent.sent_at_ms,
                                                **listener.turn_fields(listen, posts)))


def listened(reader: TurnReader, listen: ListenSpec, turn: AgentTurn) -> AgentTurn:
    """A turn of posts, once it is known that `listen.text` found something in them (`TurnReader.said_nowhere`)."""
    if not any(isinstance(doc, str) or values(listen.text, doc) for doc in turn.raw):
        count = len(turn.raw)
        reader.said_nowhere(turn, turn.raw, key="response.listen.text", path=listen.text,
                            where=f"the agent's {count} post{'s' if count != 1 else ''}",
                            set_here="text" in listen.model_fields_set,
                            hint="set response.listen.text to the field with the reply")
    return turn
