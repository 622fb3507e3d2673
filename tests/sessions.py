"""A run's `Session` for tests that drive a target (or a model, or a check) directly, without the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tamesu.conversation import Session
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context


def new_session(tmp_path: Path, *, environ: dict[str, str] | None = None, vars: dict[str, Any] | None = None,
                run_id: str = "t", models: Any = None, **namespaces: object) -> Session:
    """A session whose artifacts go to `tmp_path`, with the secrets of `environ` (and a redactor that hides
    them), the suite's `vars`, and more template namespaces (`run={"id": ...}`) as the engine gives them."""
    secrets = Secrets(environ=environ or {})
    return Session(context=Context(vars=vars or {}, captured={}, secrets=secrets, **namespaces),
                   artifacts_dir=tmp_path, redactor=secrets.redactor, run_id=run_id, base_dir=tmp_path,
                   models=models)


def events(session: Session, name: str) -> list[dict[str, Any]]:
    """The data of the session's events called `name`, in the order they happened."""
    return [e.data for e in session.events if e.name == name]
