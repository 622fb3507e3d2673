"""What the two SDK-backed providers (`openai`, `anthropic`) share: being made from a spec (a key, or none for
a server on this machine), the SDK client's lifetime, and reading the SDK's failure as one ModelError line. The
two SDKs name their errors alike (APITimeoutError, APIConnectionError, APIStatusError), so one reading serves."""

from __future__ import annotations

import os
from abc import abstractmethod
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Self

from tamesu.models._where import base_url_in_use, reached
from tamesu.models.base import ModelError, Provider
from tamesu.models.client import DEFAULT_BASE_URLS, DEFAULT_ENV_BASE_URLS, LOCAL_PLACEHOLDER_KEY
from tamesu.models.said import is_local_url, one_line, redact
from tamesu.models.spec import ModelSpec
from tamesu.net.bounded import is_too_large
from tamesu.net.clients import os_reason
from tamesu.net.retry_after import retry_after_from_headers
from tamesu.net.tls import TlsSpec


class SdkProvider(Provider):
    key_variable: ClassVar[str]
    """The environment variable the key is read from when the suite gives none (OPENAI_API_KEY...)."""
    call_path: ClassVar[str]
    """The path every call posts to, named in the line of a server that cannot be reached."""

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, timeout: float = 60.0,
                 headers: dict[str, str] | None = None, tls: TlsSpec | None = None) -> None:
        super().__init__(model)
        self.base_url = base_url
        self.timeout = timeout
        self._api_key = api_key
        self._own_headers = {name.lower() for name in headers or {}}
        self._headers = headers
        self._tls = tls
        self._client: Any = None
        """The SDK's client, made on the first call (importing the SDK is not free)."""
        self._send_temperature = True
        """False once the server refused `temperature`: not sent again for the rest of the run."""

    @classmethod
    def from_spec(cls, spec: ModelSpec, api_key: str | None, *, base_dir: Path | None = None) -> Self:
        del base_dir  # reads no files
        key = api_key or os.environ.get(cls.key_variable)
        if key and key != key.strip():
            # a key file's trailing newline (`KEY=$(cat key)` keeps none; a mounted secret or a pasted value may):
            # sent as it is, every call failed as an internal error of the HTTP client
            where = "models.X.api_key" if api_key else cls.key_variable
            raise ModelError(f"{cls.name}: the API key from {where} begins or ends with a line break or spaces, "
                             "which an HTTP header cannot carry: remove them")
        if not key:
            if not is_local_url(base_url_in_use(spec.base_url, DEFAULT_ENV_BASE_URLS[cls.name], "")):
                raise ModelError(f"{cls.name}: no API key (set {cls.key_variable} or models.X.api_key)")
            key = LOCAL_PLACEHOLDER_KEY  # Ollama, vLLM, LM Studio on this machine need none
        return cls(spec.model, api_key=key, base_url=spec.base_url, timeout=spec.timeout, headers=spec.headers,
                   tls=spec.tls)

    @abstractmethod
    def _sdk(self) -> Any:
        """The SDK's client, made (and the SDK imported) on the first use."""

    def prepare(self) -> None:
        self._sdk()

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    @staticmethod
    @abstractmethod
    def _server_message(exc: Any) -> str:
        """The server's own words in a refused call (the subclass's SDK's APIStatusError, so typed loosely)."""

    def base_url_meant(self, path: str) -> str | None:
        """The base_url the suite likely meant when a call to `path` found no such path, or None."""
        del path
        return None

    def _path_hint(self, exc: Any) -> str:
        # a base_url without its /v1 (or, for Anthropic, with one) is the usual reason for a 404: say what was
        # asked for and what was likely meant, rather than only the server's "404 page not found"
        if not self.base_url:
            return ""
        try:
            url = exc.response.request.url
        except (AttributeError, RuntimeError):  # no request to read
            return ""
        meant = self.base_url_meant(url.path)
        return f" (POST {url}: is base_url {meant!r}?)" if meant else ""

    def _reached(self, exc: Exception) -> str:
        # the URL the failed request went to: the suite's base_url, else the SDK's *_BASE_URL, else the public API
        base = base_url_in_use(self.base_url, DEFAULT_ENV_BASE_URLS[self.name], DEFAULT_BASE_URLS[self.name])
        return reached(exc, self.call_path, base)

    def _error(self, exc: Exception, sdk: ModuleType) -> ModelError:
        """The SDK's error (`sdk` is the SDK's module) as one line, retryable when another try may work."""
        where = f"{self.name}:{self.model}"
        if is_too_large(exc):  # the model target's max_response_bytes: the same answer again would be refused too
            return ModelError(f"{where}: {one_line(str(exc.__cause__ or exc.__context__ or exc))}")
        if isinstance(exc, sdk.APITimeoutError):
            return ModelError(f"{where}: no answer within {self.timeout:g}s", retryable=True, timed_out=True)
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f" ({os_reason(cause)})" if cause else ""  # a TLS failure's reason, or the OS's
            return ModelError(f"{where}: cannot reach {self._reached(exc)}{detail}", retryable=True)
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            message = redact(one_line(self._server_message(exc)), self._api_key)
            if status == 404:
                message += redact(self._path_hint(exc), self._api_key)
            # 529 is Anthropic's "overloaded": a 5xx like the others
            return ModelError(f"{where}: HTTP {status}: {message}",
                              retryable=status in (408, 409, 429) or status >= 500,
                              retry_after=retry_after_from_headers(exc.response.headers),
                              should_retry=exc.response.headers.get("x-should-retry"), status=status)
        return ModelError(f"{where}: {redact(one_line(str(exc)), self._api_key)}")
