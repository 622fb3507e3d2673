"""Azure OpenAI: chat completions of a deployment, through the openai SDK's own Azure client (`AsyncAzureOpenAI`),
so the request is the one Microsoft documents: `{endpoint}/openai/deployments/{deployment}/chat/completions
?api-version=...` with the key in an `api-key` header. Everything else (the adaptations a server's 400 teaches, the
answer's reading, errors) is the openai provider's.

The spec's `model` is the deployment's name, `base_url` the resource's endpoint (`https://NAME.openai.azure.com`,
else `AZURE_OPENAI_ENDPOINT`), `api_version` the API version (else `OPENAI_API_VERSION`, else `DEFAULT_API_VERSION`),
the key `api_key` or `AZURE_OPENAI_API_KEY`: the variables the SDK itself reads. Azure's newer `/openai/v1/` API needs
none of this: it is the openai provider with `base_url: https://NAME.openai.azure.com/openai/v1`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Self

from tamesu.models._sdk_http import sdk_http_client, sdk_timeout
from tamesu.models.base import ModelError
from tamesu.models.openai import OpenAIProvider
from tamesu.models.spec import ModelSpec
from tamesu.plugins import register

if TYPE_CHECKING:
    import openai

DEFAULT_API_VERSION = "2024-10-21"
"""A generally available version of Azure OpenAI's data-plane API (chat completions with tools and JSON schema)."""
ENDPOINT_VARIABLE = "AZURE_OPENAI_ENDPOINT"
VERSION_VARIABLE = "OPENAI_API_VERSION"


@register("providers", "azure")
class AzureOpenAIProvider(OpenAIProvider):
    name = "azure"
    key_variable = "AZURE_OPENAI_API_KEY"

    api_version = DEFAULT_API_VERSION

    @classmethod
    def from_spec(cls, spec: ModelSpec, api_key: str | None, *, base_dir: Path | None = None) -> Self:
        endpoint = spec.base_url or os.environ.get(ENDPOINT_VARIABLE)
        if not endpoint:
            raise ModelError(f"azure:{spec.model}: no endpoint (set models.X.base_url to the resource's "
                             f"https://NAME.openai.azure.com, or {ENDPOINT_VARIABLE})")
        provider = super().from_spec(spec.model_copy(update={"base_url": endpoint}), api_key, base_dir=base_dir)
        provider.api_version = spec.api_version or os.environ.get(VERSION_VARIABLE) or DEFAULT_API_VERSION
        return provider

    def base_url_meant(self, path: str) -> str | None:
        # the endpoint is the resource's origin: the SDK adds /openai/deployments/...; one that already ends in
        # /openai (copied from a portal's sample URL) asks for /openai/openai/...
        if self.base_url and "/openai/openai/" in path:
            return self.base_url.rstrip("/").removesuffix("/openai")
        return None

    def _post_url(self, sdk: openai.AsyncOpenAI) -> str:
        # the path alone: the Azure client puts the deployment's path in front of it (an absolute URL skips that)
        return "/chat/completions"

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            import openai  # on the first call, as the openai provider does

            self._client = openai.AsyncAzureOpenAI(
                api_key=self._api_key, azure_endpoint=self.base_url or "", api_version=self.api_version,
                timeout=sdk_timeout(self.timeout), max_retries=0, default_headers=self._headers or None,
                http_client=sdk_http_client(self._tls))
        client: openai.AsyncOpenAI = self._client
        return client
