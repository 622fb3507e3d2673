"""A secret an agent answers as a JSON number (a PIN, an account number) is masked on disk as surely as one it
answers as text: result.json, the transcript, the reports and the results store."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PIN = 48213977


async def _chat(request: Request) -> JSONResponse:
    await request.json()
    # the number alone, inside a larger one, and as a float: each holds the secret's digits
    return JSONResponse({"text": "your card is ready", "pin": PIN, "account": int(f"7{PIN}"), "score": PIN + 0.5,
                         "turn": 1, "ok": True})


def test_a_secret_answered_as_a_number_is_masked_on_disk(tmp_path: Path, tamesu, serve) -> None:
    url = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).url
    (tmp_path / ".env").write_text(f"CARD_PIN={PIN}\n")
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\nsecrets: { env_files: [.env] }\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bank: {{ type: rest, url: '{url}/chat', headers: {{ X-Pin: '{{{{secrets.CARD_PIN}}}}' }} }}
tests:
  - name: card
    target: bank
    scenario: {{ script: [ {{ say: 'is my card ready?' }} ] }}
    assert: [ {{ json_path: {{ path: $.turn, equals: 1 }} }}, {{ contains: ready }} ]
""")
    result = tamesu(["run", "--out", "out", "--report", "junit,json,html"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    written = [p for p in [*(tmp_path / "out").rglob("*"), tmp_path / ".tamesu" / "store.db"] if p.is_file()]
    assert any(p.name == "result.json" for p in written)
    leaked = [p.name for p in written if str(PIN).encode() in p.read_bytes()]
    assert leaked == [], leaked
    detail = next((tmp_path / "out").rglob("result.json")).read_text()
    # what held no secret stays a number; what did is masked text
    assert '"turn": 1' in detail and '"pin": "***"' in detail and '"account": "7***"' in detail, detail
