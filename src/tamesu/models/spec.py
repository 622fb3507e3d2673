"""How a user names a model in `tamesu.yaml` or a suite: `models:`, `budget:` and the replay `cache:`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from tamesu import plugins
from tamesu.net.tls import TlsSpec as TlsSpec  # re-exported: suite.schema names the tls block from here
from tamesu.types import Duration, HomePath, Strict, YamlFloat, YamlInt

PROVIDER_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY")
"""Where the SDK providers find a key no `api_key` gave (each provider's `key_variable`): secrets like any other."""


def known_providers() -> list[str]:
    """The built-in providers (each registered in its own module), then the plug-ins' that load: one that does
    not is no name to offer (a suite that names it is told why)."""
    built_in = plugins.built_in_names("providers")
    return [*built_in, *(name for name in plugins.names("providers")
                         if name not in built_in and _plugin_problem(name) is None)]


def _plugin_problem(provider: str) -> str | None:
    """Why a plug-in's provider cannot be used, imported now; None when it can."""
    from tamesu.models.base import ModelError
    from tamesu.models.client import provider_class

    try:
        found = provider_class(provider)
    except ModelError as exc:
        return str(exc)
    return plugins.unimplemented("providers", provider, found)


class PriceSpec(Strict):
    """Dollars per million tokens; overrides tamesu's price table for this model."""

    input_per_mtok: YamlFloat = Field(ge=0)
    """Dollars per million input (prompt) tokens."""
    output_per_mtok: YamlFloat = Field(ge=0)
    """Dollars per million output tokens."""


class ModelSpec(Strict):
    """One model: `openai:gpt-4o-mini`, or a mapping with the provider's settings."""

    provider: str
    """A built-in provider (openai, anthropic, azure, fake) or a plug-in's."""
    model: str = ""
    """The provider's model name (`gpt-4o-mini`, `claude-sonnet-4-5`); the fake provider needs none."""
    base_url: str | None = None
    """Any OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter) or an Anthropic-shaped one; for azure,
    the resource's endpoint (`https://NAME.openai.azure.com`)."""
    api_key: str | None = None
    """A template such as `{{secrets.OPENAI_API_KEY}}`; default the provider's usual environment variable."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers sent with every request to the model's server; templates allowed."""
    api_version: str | None = None
    """azure only: the Azure OpenAI API version (`2024-10-21`); default `OPENAI_API_VERSION`, else 2024-10-21."""
    temperature: YamlFloat | None = Field(None, ge=0, le=2)
    """Sampling temperature (0-2); default the provider's."""
    max_tokens: YamlInt | None = Field(None, ge=1)
    """The most tokens the model may answer with; default the provider's."""
    timeout: Duration = Field(60.0, gt=0)
    """How long one model request may take before it counts as failed (and is retried)."""
    max_retries: YamlInt = Field(3, ge=0, le=10)
    """How often a failed or timed-out request is retried, backing off, before `fallback` (or an error)."""
    max_concurrent: YamlInt | None = Field(None, ge=1)
    """At most this many requests to the model at once, across the run; the others wait their turn, and the wait
    is no part of `timeout`. For a server that answers one or a few at a time (Ollama, llama.cpp); default no
    limit."""
    tls: TlsSpec | None = None
    """Trust and client certificates for the model's server (`tamesu.net.tls`)."""
    price: PriceSpec | None = None
    """Dollars per million tokens for this model, over tamesu's price table (for the budget and cost metrics)."""
    rules: Any = None
    """fake only: the rules that decide its answers (a list, or a path to a YAML file of them)."""
    fallback: ModelSpec | None = None
    """Used when this model still fails after its retries."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if isinstance(value, str):
            provider, colon, model = value.partition(":")
            if not colon and not plugins.has("providers", provider):
                # a name the models: map did not resolve (ModelMap): "unknown model provider" would mislead
                raise ValueError(f"{value!r} is neither provider:model nor another model of the same models: "
                                 f"(nor, in a suite, of tamesu.yaml's) (providers: {', '.join(known_providers())})")
            return {"provider": provider, "model": model}
        return value

    @field_validator("base_url")
    @classmethod
    def _a_server(cls, url: str | None) -> str | None:
        # no scheme: retried four times at the run's first call, then "the URL's scheme '' is not http(s)"
        if url is not None and "{{" not in url and not url.lower().startswith(("http://", "https://")):
            raise ValueError(f"base_url starts with http:// or https://, got {url!r}")
        if url is not None and "{{" not in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
            # the SDKs send the key as a header of their own: beside credentials in the URL, the HTTP client
            # refused the request ("internal error: ValueError: Cannot combine AUTHORIZATION header ...")
            raise ValueError("base_url carries user:password@, which cannot go beside the API key's header: give "
                             "the key as api_key, or other credentials as headers")
        return url

    @field_validator("provider")
    @classmethod
    def _known(cls, provider: str) -> str:
        if not plugins.has("providers", provider):
            raise ValueError(f"unknown model provider {provider!r} (one of {', '.join(known_providers())})")
        if not plugins.is_built_in("providers", provider):
            # imported now, as a plug-in's target or check is: one that does not load is a problem of the suite
            # that names it (exit 2, where written), not an error of every test that calls it
            problem = _plugin_problem(provider)
            if problem is not None:
                raise ValueError(problem)
        return provider

    @model_validator(mode="after")
    def _complete(self) -> ModelSpec:
        if self.provider != "fake" and not self.model:
            raise ValueError(f"a {self.provider} model needs a model name, such as {self.provider}:<model>")
        if self.provider != "fake" and self.rules is not None:
            raise ValueError("rules are for the fake provider only")
        if self.provider != "azure" and self.api_version is not None:
            raise ValueError("api_version is for the azure provider only")
        return self


class BudgetSpec(Strict):
    """The most a run may spend on tamesu's own model calls; past it the run stops with exit 4."""

    usd: YamlFloat | None = Field(None, ge=0)
    """The most dollars a run may spend on tamesu's model calls."""
    tokens: YamlInt | None = Field(None, ge=0)
    """The most tokens a run may spend on tamesu's model calls."""


class CacheSpec(Strict):
    """The replay cache of model calls."""

    dir: HomePath = ".tamesu/cache"
    """The cache's folder, relative to tamesu.yaml."""
    mode: Literal["use", "off", "only"] = "use"
    """use: read and write; off: neither (`--no-cache`); only: fail on a miss (`--cache-only`)."""


OUTER_MODELS = "outer_models"
"""The validation context's key for the models a suite's `models:` may also name: the project's (tamesu.yaml)."""


def _named_fallbacks(models: object, info: ValidationInfo) -> object:
    """`fallback: NAME` naming another model of the same `models:` is that model, as an assertion's `model: NAME`
    names one; in a suite, a name its own map lacks may be one of the project's models (`OUTER_MODELS` in the
    validation context), as a target's or assertion's `model:` may; a name that comes round again is left for
    the model's own check to refuse."""
    if not isinstance(models, dict):
        return models
    outer = (info.context or {}).get(OUTER_MODELS) or {}

    def resolved(entry: object, seen: frozenset[object]) -> object:
        named = entry.get("fallback") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(named, str) or named in seen:
            return entry
        if named not in models:
            return {**entry, "fallback": outer[named]} if named in outer else entry
        return {**entry, "fallback": resolved(models[named], seen | {named})}

    return {key: resolved(value, frozenset({key})) for key, value in models.items()}


ModelMap = Annotated[dict[str, ModelSpec], BeforeValidator(_named_fallbacks)]
"""A `models:` map: each model by name, a `fallback` naming another model of the map resolved to it."""
