"""A role whose model cannot answer is an infrastructure error of the run (exit 3), never a verdict."""

from __future__ import annotations

from collections.abc import Sequence

from tamesu.errors import InfraError
from tamesu.models.base import ModelError
from tamesu.models.structured import Attempt, StructuredOutputError


def infra_error(role: str, exc: ModelError) -> InfraError:
    """`<role>: <what went wrong>`, without saying the role twice when the message already starts with it."""
    message = str(exc)
    named = message.startswith((f"{role}:", f"fake {role}:"))
    return InfraError(message if named else f"{role}: {message}")


class VerdictNotTaken(InfraError):
    """A model answered for a verdict or a score, and no answer was taken (none fit the schema, or its quotes
    are nowhere in what it was shown). The run is an error, and its assertion still records who answered
    (`model`), with which prompt, and every answer read: the record of a verdict, kept though it decided
    nothing."""

    def __init__(self, message: str, *, model: str | None, prompt_version: str | None, fake: bool = False,
                 attempts: Sequence[Attempt] = (), unsupported: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.model = model
        self.prompt_version = prompt_version
        self.fake = fake
        self.attempts = list(attempts)
        self.unsupported = list(unsupported)
        """The quotes that were not in what the model was shown, when that is why the answer was not taken."""


def not_taken(role: str, exc: StructuredOutputError, prompt_version: str,
              unsupported: Sequence[str] = ()) -> VerdictNotTaken:
    """`infra_error`'s line for an answer not taken, with what the assertion keeps of it."""
    last = exc.responses[-1] if exc.responses else None
    return VerdictNotTaken(str(infra_error(role, exc)), model=f"{last.provider}:{last.model}" if last else None,
                           prompt_version=prompt_version, fake=last.fake if last else False, attempts=exc.attempts,
                           unsupported=unsupported)
