"""A target's `handoff:` signal read from a turn as tamesu keeps it, for the types whose own reading does not.

Every target takes `handoff:` (a JSONPath truthy in the agent's documents, or a pattern in its text), but only a
few read it while they read a turn (`Target.reads_handoff`). Without this, on the others (a2a, the audio types,
a plug-in's) the signal was accepted and never looked at: `handoff: false` passed however the agent handed over.
"""

from __future__ import annotations

from tamesu.conversation import AgentTurn, Session
from tamesu.targets.base import Target, TargetSpec
from tamesu.targets.rest.read import handoff


def signalled(target: Target[TargetSpec], turn: AgentTurn, session: Session) -> AgentTurn:
    """`turn`, with the handoff its target's signal shows (and a `handoff` event, as the reading types record)."""
    spec = target.spec.handoff
    if spec is None or turn.handoff is not None or type(target).reads_handoff:
        return turn
    docs = [*turn.raw, *([] if turn.response is None or any(d is turn.response for d in turn.raw)
                         else [turn.response])]
    turn.handoff = handoff(spec, turn.text, docs)
    if turn.handoff is not None:
        session.event("handoff", to=turn.handoff.to, summary=turn.handoff.summary)
    return turn
