"""The last reply on a Realtime call, read to its `response.done` when the call ends: a persona that talks over
replies ends a turn at the point it would start talking, but after the last reply it has nothing more to say, so
nobody talks over it. Hung up there, that reply was cut at a random point (`interrupt_probability`): its text was
the transcript that had come by then ("Of course. For how "), and an assertion on the agent's last words failed
the agent for words it was still saying."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tamesu.conversation import AgentTurn, TurnAudio, TurnError
from tamesu.targets.realtime.parts import Reply

if TYPE_CHECKING:
    from tamesu.targets.realtime.target import RealtimeTarget


async def hear_out(target: RealtimeTarget, last: tuple[Reply, TurnAudio | None, float], turn: AgentTurn) -> None:
    """Read the rest of the last reply (`last`: what its turn gathered, its audio record, when it was asked) into
    `turn`, the agent's turn the engine holds, within `turn_timeout`; a failure here is the call ending, not news."""
    reply, audio, sent_at = last
    session = target._require_session()
    target._require_voice().hold_barge_in()
    try:
        async with asyncio.timeout(target.spec.turn_timeout):
            await target._read_reply(session, reply, audio)
    except (TimeoutError, TurnError):
        return  # the call ended, or the reply did not within turn_timeout: it stays as it was
    except Exception as exc:  # the reply stays as it was; the socket is closed after all the same
        session.event("reply_heard_out_failed", reason=f"{type(exc).__name__}: {exc}")
        return
    whole = reply.turn(sent_at, session.now_ms(), audio, turn.measures)
    turn.text, turn.raw, turn.tool_calls = whole.text, whole.raw, whole.tool_calls
    turn.completed_at_ms, turn.ended = whole.completed_at_ms, whole.ended
    session.event("reply_heard_out", to_ms=round(turn.completed_at_ms, 1), why="the persona was to talk over the "
                  "last reply but had nothing more to say: it was heard to its end")
