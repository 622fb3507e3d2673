"""A provider made dependable: the replay cache, retries with backoff, a fallback model, cost and budget.

`ResilientClient.generate` does, in order: the cache (a hit is free and final; the fake provider skips it);
the provider, retried on rate limits, 5xx and timeouts; on final failure the `fallback` model's own client
(recursively); then the answer is priced (one without token counts said), recorded in the cache and charged.
An answer that passes the budget is still recorded: it was paid for, and the next run replays it for free.

`ModelRegistry` gives each role (`simulator`, `judge`, `extract`, or any name under `models:`) its client,
creating providers lazily (importing `anthropic` alone costs a second) and sharing them between clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import ValidationError

from tamesu.errors import TemplateError
from tamesu.models import pricing
from tamesu.models._gate import Gate
from tamesu.models._retries import Sleep, delay, wait_to_retry
from tamesu.models._where import base_url_in_use
from tamesu.models.base import Embeddings, Message, ModelError, ModelRequest, ModelResponse, Provider
from tamesu.models.cache import ReplayCache, canonical_json, label
from tamesu.models.ledger import Ledger
from tamesu.models.said import is_local_url
from tamesu.models.spec import ModelSpec, known_providers
from tamesu.telemetry import otel

TIMEOUT_MARGIN = 5.0
"""Seconds beyond the spec's timeout (the SDK's, per read) before a call is abandoned (a trickling server)."""

_THE_AGENTS_OWN = ("target", "counterpart")
"""Calls made as the agent under test (or the agent in the user's seat): sent as the test wrote them."""

DEFAULT_ENV_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "azure": "AZURE_OPENAI_API_KEY"}
DEFAULT_ENV_BASE_URLS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL",
                         "azure": "AZURE_OPENAI_ENDPOINT"}
"""Where each SDK reads its base URL when it is given none (tamesu gives none when the suite sets none)."""
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com", "azure": ""}
"""The public API each provider's SDK sends to; Azure has none (every resource has its own endpoint)."""
LOCAL_PLACEHOLDER_KEY = "tamesu-local"
"""Sent as the key to servers on this machine (Ollama, vLLM...) when none is configured: they need none."""

Record = Callable[..., Any]
"""`record(name, **data)`: where a client reports its retries and timeouts (a run's `session.event`)."""


# ---- the client -----------------------------------------------------------------------------------------


class ResilientClient:
    """One model spec, with the cache, retries, fallback and budget around its provider (a ModelClient)."""

    def __init__(
        self,
        spec: ModelSpec,
        provider: Provider | Callable[[], Provider],
        *,
        cache: ReplayCache | None = None,
        ledger: Ledger | None = None,
        fallback: ResilientClient | None = None,
        sleep: Sleep | None = None,
        record: Record | None = None,
        gate: Gate | None = None,
        mask: Callable[[Any], Any] | None = None,
    ) -> None:
        self.spec = spec
        self._record = record
        self._mask = mask
        """The run's redactor: what tamesu's own roles send (a judge's transcript, a simulator's history) shows a
        secret the agent repeated as `***`, as every file does; the agent's own model (a `model` target) is sent
        what the test says."""
        self._gate = gate or Gate(spec.max_concurrent)
        """Held while a request is out (`max_concurrent`), shared by every client of the same server."""
        self._provider = provider if isinstance(provider, Provider) else None
        self._make_provider = None if isinstance(provider, Provider) else provider
        # the fake provider is free, offline and deterministic, and its rules are not part of the key: caching
        # it would only replay answers from rules since edited
        self.cache = cache if spec.provider != "fake" else None
        self.ledger = ledger
        self.fallback = fallback
        self._sleep = sleep or asyncio.sleep
        self.attempts = 0
        """Provider calls made by this client (not its fallback): for tests and diagnostics."""

    @property
    def label(self) -> str:
        return label(self.spec)

    def provider(self) -> Provider:
        """This spec's provider, created on first use (so a replay from the cache needs neither SDK nor key)."""
        if self._provider is None:
            assert self._make_provider is not None
            self._provider = self._make_provider()
        return self._provider

    async def generate(self, request: ModelRequest) -> ModelResponse:
        with otel.active().span("tamesu.model_call", model=self.label, purpose=str(request.purpose)) as span:
            response = await self._generate(request)
            if span is not None:
                span.set_attribute("tamesu.input_tokens", response.usage.input_tokens)
                span.set_attribute("tamesu.output_tokens", response.usage.output_tokens)
            return response

    async def _generate(self, request: ModelRequest) -> ModelResponse:
        request = self._with_defaults(request)
        if self.cache is not None:
            hit = self.cache.get(self.spec, request, self._record)  # raises CacheMiss with --cache-only
            if hit is not None:
                self._charge(hit, request)
                return hit
        try:
            response = await self._call_with_retries(request)
        except ModelError as primary:
            if self.fallback is None:
                raise
            try:
                response = await self.fallback.generate(request)
            except ModelError as secondary:
                raise ModelError(f"{primary}; fallback {secondary}", retryable=secondary.retryable) from None
            if self._record is not None:  # a judge's or simulator's answer from another model: said (it was silent)
                self._record("model_fallback", model=self.label, purpose=request.purpose,
                             fallback=self.fallback.label, reason=str(primary))
            # priced, charged, recorded by the fallback's client under its spec; cached under this one for a replay
            if self.cache is not None:
                self.cache.put(self.spec, request, response)
            return response
        # the provider's answer, made for this call: priced in place (a copy of it was made for every call)
        response.cost_usd = pricing.cost(self.spec, response.usage)
        if not (response.usage.reported or response.fake or self._record is None):
            self._record("model_usage_missing", model=self.label, purpose=request.purpose)
        if self.cache is not None:  # what this run's server refused is no part of the answer a replay gets
            self.cache.put(self.spec, request,
                           response.model_copy(update={"adapted": []}) if response.adapted else response)
        self._charge(response, request)
        return response

    async def embed(self, texts: list[str]) -> Embeddings:
        """Vectors for `texts` through the provider's embeddings API, with the cache, retries and ledger of
        `generate` (no fallback: another model's vectors are not comparable with this one's)."""
        if self._mask is not None:  # the agent's words: a secret it repeated is not sent either
            texts = [str(self._mask(text)) for text in texts]
        request = ModelRequest(purpose="embedding", messages=[Message(role="user", content=t) for t in texts])
        if self.cache is not None:
            hit = self.cache.get(self.spec, request, self._record)
            if hit is not None:
                self._charge(hit, request)
                return Embeddings(vectors=json.loads(hit.text), usage=hit.usage)

        async def call(provider: Provider) -> ModelResponse:
            found = await provider.embed(texts)
            if len(found.vectors) != len(texts):
                raise ModelError(f"{self.label}: the embeddings API gave {len(found.vectors)} vectors for "
                                 f"{len(texts)} texts")
            return ModelResponse(text=json.dumps(found.vectors), usage=found.usage, provider=self.spec.provider,
                                 model=provider.model, fake=self.spec.provider == "fake")

        with otel.active().span("tamesu.model_call", model=self.label, purpose="embedding"):
            response = await self._call_with_retries(request, call)
        response = response.model_copy(update={"cost_usd": pricing.cost(self.spec, response.usage)})
        if self.cache is not None:
            self.cache.put(self.spec, request, response)
        self._charge(response, request)
        return Embeddings(vectors=json.loads(response.text), usage=response.usage)

    def forget(self, request: ModelRequest) -> None:
        """The answer to `request` was unusable: it leaves the replay cache (`ReplayCache.forget`)."""
        if self.cache is not None:
            self.cache.forget(self.spec, self._with_defaults(request))

    def _with_defaults(self, request: ModelRequest) -> ModelRequest:
        # the spec's settings apply where the caller left them open; done before the cache key is taken,
        # so changing `temperature:` in tamesu.yaml records new answers
        update: dict[str, object] = {}
        if self._mask is not None and request.purpose not in _THE_AGENTS_OWN:
            messages = [m if (masked := self._mask(m.content)) == m.content  # nothing masked: not copied
                        else m.model_copy(update={"content": masked}) for m in request.messages]
            context = self._mask(request.context)
            # the request is copied only when a secret was masked in it (seldom): a copy was some twenty calls
            if messages != request.messages:  # the same messages, each compared by identity first
                update["messages"] = messages
            if context != request.context:
                update["context"] = context
        if request.temperature is None and self.spec.temperature is not None:
            update["temperature"] = self.spec.temperature
        if request.max_tokens is None and self.spec.max_tokens is not None:
            update["max_tokens"] = self.spec.max_tokens
        return request.model_copy(update=update) if update else request

    async def _call_with_retries(self, request: ModelRequest,
                                 call: Callable[[Provider], Awaitable[ModelResponse]] | None = None) -> ModelResponse:
        tries = self.spec.max_retries + 1
        for attempt in range(tries):
            if self.ledger is not None:
                self.ledger.ensure_open()  # do not pay for another call once the budget is spent
            try:
                provider = self.provider()
                self.attempts += 1
                async with self._gate.held(request, self.spec), asyncio.timeout(self.spec.timeout + TIMEOUT_MARGIN):
                    if self.ledger is not None:
                        # again once its turn came: a call that waited for `max_concurrent` while the
                        # budget was passed is not sent (they all were, 2.4 times the budget spent)
                        self.ledger.ensure_open()
                    response = await (provider.generate(request) if call is None else call(provider))
                for change in response.adapted:  # a refused parameter, learnt once: said where it happened
                    if self._record is not None:
                        self._record("model_adapted", model=self.label, purpose=request.purpose, change=change)
                return response
            except TimeoutError:
                error = ModelError(f"{self.label}: no whole answer within {self.spec.timeout + TIMEOUT_MARGIN:g}s "
                                   f"(timeout {self.spec.timeout:g}s, each read within it, the whole answer "
                                   f"{TIMEOUT_MARGIN:g}s more)", retryable=True, timed_out=True)
            except ModelError as exc:
                error = exc
            last = not error.retryable or attempt == tries - 1
            if error.timed_out:
                self._note("model_timeout", request, attempt=attempt + 1, after_s=self.spec.timeout, retried=not last)
            if last:
                if tries > 1 and error.retryable:
                    raise ModelError(f"{error} (gave up after {tries} attempts)", retryable=True,
                                     retry_after=error.retry_after, timed_out=error.timed_out,
                                     status=error.status) from None
                raise error
            wait = delay(attempt, error)
            self._note("model_retry", request, attempt=attempt + 2, after=str(error), wait_s=round(wait, 3))
            await wait_to_retry(self._sleep, wait, request, self.spec, error, attempt + 1, tries, self.label)
        raise AssertionError("unreachable")

    def _note(self, name: str, request: ModelRequest, **data: object) -> None:
        """A retry or a timeout: counted in the ledger (the run's `llm_retries`, `llm_timeouts`) and an event."""
        if self.ledger is not None:
            self.ledger.note(retry=name == "model_retry", timeout=name == "model_timeout")
        if self._record is not None:
            self._record(name, model=self.label, purpose=request.purpose, **data)

    def _charge(self, response: ModelResponse, request: ModelRequest) -> None:
        if self.ledger is not None:
            self.ledger.charge(response, request.purpose)


# ---- the registry ---------------------------------------------------------------------------------------


class ModelRegistry:
    """The models of one run by role (the `Models` protocol): clients with a shared cache and ledger.

    `render` turns templates such as `{{secrets.X}}` in `api_key`, `base_url` and `headers` into values; it is
    called only when a provider is created, so a replay from the cache needs no secrets. `render_url` renders
    `base_url` (`Context.render_url`: a templated password holding `/` in its `user:password@` stays whole);
    left out, `render` does.
    """

    def __init__(
        self,
        specs: Mapping[str, ModelSpec],
        *,
        render: Callable[[str], str] | None = None,
        render_url: Callable[[str], str] | None = None,
        cache: ReplayCache | None = None,
        ledger: Ledger | None = None,
        sleep: Sleep | None = None,
        base_dir: Path | None = None,
        record: Record | None = None,
        mask: Callable[[Any], Any] | None = None,
        _providers: dict[str, Provider] | None = None,
        _gates: dict[str, Gate] | None = None,
    ) -> None:
        self.specs = dict(specs)
        self.mask = mask
        """The run's redactor (`Redactor.data`), for what tamesu's own roles send (`ResilientClient`)."""
        self.base_dir = base_dir
        """Where the fake provider finds a rules file named by a relative path (the suite's directory)."""
        self.render = render or (lambda text: text)
        self.render_url = render_url or self.render
        self.cache = cache
        self.ledger = ledger if ledger is not None else Ledger()
        self._sleep = sleep
        self._record = record
        self._providers: dict[str, Provider] = _providers if _providers is not None else {}
        self._gates: dict[str, Gate] = _gates if _gates is not None else {}
        """By connection, as the providers: every test run's registry waits on the same gates."""
        self._clients: dict[str, ResilientClient] = {}

    def with_ledger(self, ledger: Ledger, record: Record | None = None) -> ModelRegistry:
        """The same models (sharing providers and cache) charging another ledger, usually `ledger.scope()` of
        one test run, and reporting retries and timeouts to `record` (its `session.event`). Close the
        registry it came from, not this one."""
        return ModelRegistry(self.specs, render=self.render, render_url=self.render_url, cache=self.cache,
                             ledger=ledger, sleep=self._sleep, base_dir=self.base_dir, record=record, mask=self.mask,
                             _providers=self._providers, _gates=self._gates)

    def spec(self, role: str, override: object = None) -> ModelSpec:
        """The spec serving a role, or an assertion's `model:` override (a name under `models:`, a ModelSpec,
        a mapping, or `provider:model`)."""
        if override is not None:
            return self._resolve_override(override)
        spec = self.specs.get(role)
        if spec is None and role == "extract":
            spec = self.specs.get("judge")  # extraction is judging's sibling; one model serves both by default
        if spec is None:
            raise ModelError(f"no model for the {role}: set models.{role} in tamesu.yaml or the suite")
        return spec

    def client(self, role: str, override: object = None) -> ResilientClient:
        return self._client(self.spec(role, override))

    def embedder(self, name: str) -> ResilientClient | None:
        spec = self.specs.get(name)
        return self._client(spec) if spec is not None else None

    async def aclose(self) -> None:
        providers = list(self._providers.values())
        self._providers.clear()
        self._clients.clear()
        for provider in providers:
            # closing is best effort at the end of a run: one stuck pool must not keep others open
            with contextlib.suppress(Exception):
                await provider.aclose()

    def _resolve_override(self, override: object) -> ModelSpec:
        if isinstance(override, ModelSpec):
            return override
        if isinstance(override, str) and override in self.specs:
            return self.specs[override]
        if isinstance(override, str) and ":" not in override:
            raise ModelError(f"no model named {override!r} under models: (or write provider:model)")
        try:
            return ModelSpec.model_validate(override)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ModelError(f"model {override!r}: {first['msg']}") from None

    def _client(self, spec: ModelSpec) -> ResilientClient:
        key = canonical_json(spec.model_dump(mode="json"))
        client = self._clients.get(key)
        if client is None:
            fallback = self._client(spec.fallback) if spec.fallback is not None else None
            gate = self._gates.setdefault(_connection(spec), Gate(spec.max_concurrent))
            client = ResilientClient(spec, lambda: self._provider(spec), cache=self.cache, ledger=self.ledger,
                                     fallback=fallback, sleep=self._sleep, record=self._record, gate=gate,
                                     mask=self.mask)
            self._clients[key] = client
        return client

    def _provider(self, spec: ModelSpec) -> Provider:
        # one provider (one connection pool) per distinct connection, whatever retries or fallback say
        key = _connection(spec)
        provider = self._providers.get(key)
        if provider is None:
            rendered, api_key = self._rendered(spec)
            provider = provider_class(spec.provider).from_spec(rendered, api_key, base_dir=self.base_dir)
            self._providers[key] = provider
        return provider

    def _rendered(self, spec: ModelSpec) -> tuple[ModelSpec, str | None]:
        try:
            update = {
                "base_url": self.render_url(spec.base_url) if spec.base_url else None,
                "headers": {name: self.render(value) for name, value in spec.headers.items()},
                "api_key": None,  # handed over separately, and never kept in a spec that could be printed
            }
            api_key = self.render(spec.api_key) if spec.api_key else None
        except TemplateError as exc:
            raise ModelError(f"{label(spec)}: {exc}") from None
        return spec.model_copy(update=update), api_key or None


def _connection(spec: ModelSpec) -> str:
    """What makes two specs one connection to one server (retries, fallback and price aside)."""
    return canonical_json(spec.model_dump(mode="json", exclude={"fallback", "max_retries", "price"}))


def provider_class(name: str) -> type[Provider]:
    """The provider class registered under `name` (imported now): built in, or a plug-in's."""
    from tamesu import plugins

    if not plugins.has("providers", name):
        known = ", ".join(known_providers())
        raise ModelError(f"unknown model provider {name!r} (known: {known})")
    try:
        found = plugins.load("providers", name)
    except plugins.PluginError as exc:
        raise ModelError(str(exc)) from None
    except ImportError as exc:
        raise ModelError(f"the {name} provider needs a package that is not installed: {exc.name or exc}") from None
    if not (isinstance(found, type) and issubclass(found, Provider)):
        raise ModelError(f"plug-in tamesu.providers:{name} is not a Provider class")
    return found


# ---- `tamesu doctor` ------------------------------------------------------------------------------------


DOCTOR_PROMPT = "Reply with the single word: ready"
DOCTOR_TIMEOUT = 20.0
"""The longest `tamesu doctor` waits for its one completion from a model."""


async def check(spec: ModelSpec, render: Callable[[str], str] | None = None, timeout: float = 3.0,
                render_url: Callable[[str], str] | None = None) -> str | None:
    """What would stop this model from answering (no key, server unreachable, key refused, no completion),
    or None. A short GET of the server's model list, then one short completion through the real provider: a
    model is ready only once it has answered with a completion. The key is sent only to the configured
    server, never printed."""
    if spec.provider not in DEFAULT_BASE_URLS:  # fake, or a plug-in's provider: nothing known to ask
        return None
    render = render or (lambda text: text)
    try:
        base_url = (render_url or render)(spec.base_url) if spec.base_url else None
        api_key = render(spec.api_key) if spec.api_key else None
        headers = {name: render(value) for name, value in spec.headers.items()}
    except TemplateError as exc:
        return f"{label(spec)}: {exc}"
    env = DEFAULT_ENV_KEYS.get(spec.provider, "")
    api_key = api_key or os.environ.get(env)
    # the server the provider's calls go to: the SDK's environment variable when the suite gives no base_url
    in_use = base_url_in_use(base_url, DEFAULT_ENV_BASE_URLS[spec.provider], DEFAULT_BASE_URLS[spec.provider])
    if not api_key:
        if not is_local_url(in_use):
            return f"{label(spec)}: no API key (set {env} or api_key)"
        api_key = LOCAL_PLACEHOLDER_KEY
    if spec.provider == "azure":
        # no model list to ask (deployments are listed by the management API, not the endpoint): the completion
        # says whether the endpoint, the key, the deployment and the API version are right
        return await _completes(spec.model_copy(update={"base_url": base_url, "headers": headers, "api_key": None}),
                                api_key)
    url = in_use.rstrip("/")
    # both SDKs send the key as a bearer token (anthropic 2.x too)
    headers["Authorization"] = f"Bearer {api_key}"
    if spec.provider == "anthropic":
        url += "/v1/models"
        headers["anthropic-version"] = "2023-06-01"
    else:
        url += "/models"
    from tamesu.net.clients import async_client  # httpx: not needed by a run, only by this check

    started = time.monotonic()
    try:
        async with async_client(timeout) as http:
            answer = await http.get(url, headers=headers)
    except Exception as exc:  # any failure to connect is the finding
        return f"{label(spec)}: {_host(url)} not reachable ({type(exc).__name__} after " \
               f"{time.monotonic() - started:.1f}s)"
    if answer.status_code in (401, 403):
        return f"{label(spec)}: the key was refused by {_host(url)} (HTTP {answer.status_code})"
    # anything else (even a 404 from a server without a model list) means the server is there; whether it
    # is a model is for a completion to say
    return await _completes(spec.model_copy(update={"base_url": base_url, "headers": headers, "api_key": None}),
                            api_key)


async def _completes(spec: ModelSpec, api_key: str) -> str | None:
    """One short completion through the provider; None when it came back as a completion with text."""
    timeout = min(spec.timeout, DOCTOR_TIMEOUT)
    request = ModelRequest(purpose="target", messages=[Message(role="user", content=DOCTOR_PROMPT)],
                           max_tokens=16, temperature=0.0)
    try:
        provider = provider_class(spec.provider).from_spec(spec.model_copy(update={"timeout": timeout}), api_key)
    except ModelError as exc:
        return str(exc)
    try:
        # the SDK's first import is no part of the server's answer: on a loaded machine it alone took seconds
        provider.prepare()
        async with asyncio.timeout(timeout + TIMEOUT_MARGIN):
            response = await provider.generate(request)
    except TimeoutError:
        return f"{label(spec)}: no completion within {timeout:g}s"
    except ModelError as exc:
        return f"{exc}" if str(exc).startswith(label(spec)) else f"{label(spec)}: {exc}"
    finally:
        with contextlib.suppress(Exception):
            await provider.aclose()
    # a reasoning model spends the probe's few tokens thinking: its reasoning is an answer all the same
    if not response.text.strip() and not response.tool_calls and not response.reasoning.strip():
        return f"{label(spec)}: answered with an empty completion"
    return None


def _host(url: str) -> str:
    # host and port only: a `user:password@` in the URL is never printed
    parsed = urlparse(url)
    return parsed.netloc.rpartition("@")[2] or url
