"""`provider: azure`: Azure OpenAI's deployments through the openai SDK's own Azure client, against a local server
shaped as Azure's (`/openai/deployments/{deployment}/chat/completions?api-version=...`, the key in `api-key`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from model_servers import AzureServer, text
from sdk_groups import IN_PROCESS_SDKS
from tamesu.models.base import Message, ModelError, ModelRequest
from tamesu.models.client import ModelRegistry, check
from tamesu.models.spec import ModelSpec
from tamesu.net.serve import ThreadServer

pytestmark = IN_PROCESS_SDKS

KEY = "azure-key-0123456789abcdef"
Serve = Callable[[Any], ThreadServer]


@pytest.fixture
def azure(serve: Serve) -> tuple[AzureServer, str]:
    server = AzureServer(require_key=KEY)
    return server, server.base_url(serve(server.app).url)


def _spec(endpoint: str | None, **fields: Any) -> ModelSpec:
    return ModelSpec(**{"provider": "azure", "model": "support-gpt4o", "base_url": endpoint, "api_key": KEY, **fields})


async def _answer(spec: ModelSpec, content: str = "hello") -> str:
    models = ModelRegistry({"judge": spec})
    try:
        request = ModelRequest(purpose="judge", messages=[Message(role="user", content=content)])
        return (await models.client("judge").generate(request)).text
    finally:
        await models.aclose()


async def test_a_deployment_is_asked_as_azure_documents_it(azure: tuple[AzureServer, str]) -> None:
    server, endpoint = azure
    server.plan(text("Hello from Azure"))
    assert await _answer(_spec(endpoint)) == "Hello from Azure"
    assert await _answer(_spec(endpoint, api_version="2025-01-01-preview"), "again") == "echo: again"
    first, second = server.calls()
    assert first.path == "/openai/deployments/support-gpt4o/chat/completions"
    assert [first.query["api-version"], second.query["api-version"]] == ["2024-10-21", "2025-01-01-preview"]
    assert first.headers["api-key"] == KEY and "authorization" not in first.headers  # a key, not a bearer token
    assert first.body["messages"] == [{"role": "user", "content": "hello"}]


async def test_the_endpoint_version_and_key_come_from_the_sdks_variables(
        azure: tuple[AzureServer, str], monkeypatch: pytest.MonkeyPatch) -> None:
    server, endpoint = azure
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", endpoint)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-06-01")
    assert await _answer(ModelSpec(provider="azure", model="support-gpt4o")) == "echo: hello"
    assert server.calls()[0].query["api-version"] == "2024-06-01"
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    with pytest.raises(ModelError, match=r"^azure:support-gpt4o: no endpoint \(set models.X.base_url to the "
                                         r"resource's https://NAME.openai.azure.com, or AZURE_OPENAI_ENDPOINT\)"):
        await _answer(ModelSpec(provider="azure", model="support-gpt4o"))


async def test_mistakes_are_one_line_naming_what_to_change(azure: tuple[AzureServer, str]) -> None:
    _, endpoint = azure
    # the endpoint copied with the SDK's own /openai: the 404 says which endpoint was meant
    with pytest.raises(ModelError) as wrong_path:
        await _answer(_spec(endpoint + "/openai", max_retries=0))
    assert str(wrong_path.value).startswith("azure:support-gpt4o: HTTP 404: ")
    assert f"is base_url '{endpoint}'?" in str(wrong_path.value)
    with pytest.raises(ModelError) as refused:
        await _answer(_spec(endpoint, api_key="azure-wrong-key-99999999", max_retries=0))
    assert str(refused.value).startswith("azure:support-gpt4o: HTTP 401: ") and "wrong-key" not in str(refused.value)
    with pytest.raises(ValidationError, match="api_version is for the azure provider only"):
        ModelSpec(provider="openai", model="gpt-4o", api_version="2024-10-21")


async def test_doctor_asks_the_deployment_for_a_completion(azure: tuple[AzureServer, str]) -> None:
    server, endpoint = azure
    assert await check(_spec(endpoint)) is None
    assert [r.path for r in server.requests] == ["/openai/deployments/support-gpt4o/chat/completions"]
    refused = await check(_spec(endpoint, api_key="azure-wrong-key-99999999"))
    assert refused is not None and refused.startswith("azure:support-gpt4o: HTTP 401") and "wrong-key" not in refused


def test_a_model_target_on_azure_in_a_run(azure: tuple[AzureServer, str], tmp_path: Path, tamesu: Any) -> None:
    _, endpoint = azure
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
models:
  support: {{ provider: azure, model: support-gpt4o, base_url: "{endpoint}", api_key: "{{{{secrets.AZURE_KEY}}}}" }}
targets:
  bot: {{ type: model, model: support, system: "You help with orders." }}
tests:
  - name: greets
    target: bot
    scenario: {{ script: [ {{ say: "where is my order" }} ] }}
    assert: [ {{ contains: "echo: where is my order" }} ]
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"AZURE_KEY": KEY})
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert result["status"] == "passed"
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and not [p for p in written if KEY.encode() in p.read_bytes()]
