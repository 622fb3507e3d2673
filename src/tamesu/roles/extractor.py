"""`capture: extract`: a model takes a described value out of one agent turn, as written."""

from __future__ import annotations

from pydantic import BaseModel

from tamesu.models.base import Message, ModelClient, ModelError, ModelRequest, ModelResponse
from tamesu.models.structured import StructuredOutputError, generate_structured
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.failures import infra_error


class ExtractAnswer(BaseModel):
    found: bool
    value: str = ""


class Extractor:
    """`Extractor(client).extract("the delivery company the agent named", turn_text)`: the value, or None.

    One short call at temperature 0 per turn; a model that cannot answer is an InfraError.
    """

    def __init__(self, client: ModelClient, *, attempts: int = 3) -> None:
        self._client = client
        self._attempts = attempts
        self.prompt = _prompts.load("extract")
        self.responses: list[ModelResponse] = []
        """Every call made so far (for cost and usage)."""

    async def extract(self, description: str, turn_text: str) -> str | None:
        if not turn_text.strip():
            return None  # nothing to take a value from: no call, no cost
        messages = [Message(role="system", content=self.prompt.render("system")),
                    Message(role="user", content=self.prompt.render("user", description=description, text=turn_text))]
        request = ModelRequest(purpose="extract", messages=messages, temperature=0.0,
                               prompt_version=self.prompt.version,
                               context={"description": description, "text": turn_text})
        try:
            answer, responses = await generate_structured(self._client, request, ExtractAnswer,
                                                          attempts=self._attempts)
        except StructuredOutputError as exc:
            self.responses.extend(exc.responses)
            raise infra_error("extract", exc) from exc
        except ModelError as exc:
            raise infra_error("extract", exc) from exc
        self.responses.extend(responses)
        value = answer.value.strip()
        return value if answer.found and value else None
