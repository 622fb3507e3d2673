"""The rest target's client (`tamesu.net.direct` under `targets.rest.http.Http`) reached the way the route tests
reach an httpx client: `get` and `post` give an answer read whole (`status_code`, `json()`), failures are the
client's own (httpx's classes, `tamesu.net.direct`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict
from yarl import URL

from tamesu.net.direct import finish
from tamesu.targets.rest.http import Http


@dataclass
class Answered:
    status_code: int
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    async def aread(self) -> bytes:
        return self.content


class RestClient:
    def __init__(self, http: Http) -> None:
        self.http = http

    async def get(self, url: str, *, params: dict[str, str] | None = None) -> Answered:
        return await self.request("GET", str(URL(url).update_query(params)) if params else url)

    async def post(self, url: str, *, content: bytes, headers: dict[str, str] | None = None) -> Answered:
        return await self.request("POST", url, content=content, headers=headers)

    async def request(self, method: str, url: str, *, content: bytes | None = None,
                      headers: dict[str, str] | None = None) -> Answered:
        response = await self.http.client.send(self.http.request(method, url, CIMultiDict(headers or {}), content))
        try:
            return Answered(response.status, await response.read())
        finally:
            finish(response)

    async def aclose(self) -> None:
        await self.http.aclose()
