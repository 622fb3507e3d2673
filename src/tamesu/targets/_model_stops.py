"""Why a model target's answer ended, when it is not the model's whole answer.

A model stops at its token limit (OpenAI's finish reason `length`, Anthropic's stop reason `max_tokens`; Claude's
`model_context_window_exceeded` when the conversation filled its context) or the
server withholds what it wrote (Azure's `content_filter`, Claude's `refusal`). The turn still holds what came,
since that is what a user of the agent would have been shown; but a test failing on half a sentence must say why
it was half, so each such answer is an event (`model_answer_cut`, `model_answer_withheld`) that the console's
`along the way` line counts.
"""

from __future__ import annotations

from tamesu.conversation import Session
from tamesu.models.base import ModelResponse

CUT = ("length", "max_tokens", "model_context_window_exceeded")
WITHHELD = ("content_filter", "refusal")


def say_why_it_stopped(session: Session, response: ModelResponse, max_tokens: int | None) -> None:
    """An event when `response` is not all the model would have said; nothing otherwise."""
    reason = response.finish_reason
    if reason == "model_context_window_exceeded":  # Claude's: the conversation filled the model's context
        session.event("model_answer_cut", model=f"{response.provider}:{response.model}", finish_reason=reason,
                      max_tokens=max_tokens, chars=len(response.text),
                      note="the model's answer was cut where the conversation filled its context window: the turn "
                           "holds what it wrote until then")
    elif reason in CUT:
        limit = f" (max_tokens {max_tokens})" if max_tokens is not None else ""
        session.event("model_answer_cut", model=f"{response.provider}:{response.model}", finish_reason=reason,
                      max_tokens=max_tokens, chars=len(response.text),
                      note=f"the model's answer was cut at its token limit{limit}: the turn holds what it wrote "
                           "until then (raise max_tokens for the whole answer)")
    elif reason in WITHHELD:
        session.event("model_answer_withheld", model=f"{response.provider}:{response.model}", finish_reason=reason,
                      chars=len(response.text),
                      note=f"the server withheld the model's answer (finish reason {reason!r}): the turn holds "
                           "what it let through")
