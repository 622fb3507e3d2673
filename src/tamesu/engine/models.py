"""The project's models with its replay cache and budget, for what runs outside a suite's own models
(`tamesu test`'s generators, the Python API)."""

from __future__ import annotations

import os

from tamesu.models.cache import CacheMode, ReplayCache
from tamesu.models.client import ModelRegistry
from tamesu.models.ledger import Ledger
from tamesu.plan import Project
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context


def project_models(project: Project, secrets: Secrets, cache_mode: CacheMode | None) -> ModelRegistry | None:
    """The project's models as `tamesu run` builds them for a suite (None when none are configured)."""
    if not project.spec.models:
        return None
    cache_spec = project.spec.cache
    if cache_mode is not None:
        cache_spec = cache_spec.model_copy(update={"mode": cache_mode})
    context = Context(secrets=secrets, env=dict(os.environ), vars=project.spec.vars)
    return ModelRegistry(project.spec.models, render=context.render_text, render_url=context.render_url,
                         cache=ReplayCache.from_spec(cache_spec, base_dir=project.dir, mask=secrets.redactor.data),
                         ledger=Ledger(project.spec.budget), mask=secrets.redactor.data)
