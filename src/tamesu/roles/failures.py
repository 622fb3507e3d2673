"""A role whose model cannot answer is an infrastructure error of the run (exit 3), never a verdict."""

from __future__ import annotations

from tamesu.errors import InfraError
from tamesu.models.base import ModelError


def infra_error(role: str, exc: ModelError) -> InfraError:
    """`<role>: <what went wrong>`, without saying the role twice when the message already starts with it."""
    message = str(exc)
    named = message.startswith((f"{role}:", f"fake {role}:"))
    return InfraError(message if named else f"{role}: {message}")
