"""An answer read up to `max_response_bytes` is cut where the bound falls, with no mark: inside a secret the
agent repeated, its first characters were the turn's text (a text answer) or the end of the stand-in's excerpt
(a JSON one), on the console and in every file. The redactor masked a secret's head only before an ellipsis."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

SECRET = "S3cr3t+/=&Zq-4711"
LIMIT = 1024


async def _chat(request: Request) -> Response:
    # the secret starts 8 bytes before the bound: 7 of its characters are read, the rest is past the cut
    json_answer = request.query_params.get("json") == "1"
    opening = '{"reply": "' if json_answer else ""
    text = opening + "x" * (LIMIT - len(opening) - 8) + " " + SECRET + " and more"
    return Response(text + ('"}' if json_answer else ""),
                    media_type="application/json" if json_answer else "text/plain")


def test_a_secret_the_size_bound_cuts_leaves_no_head(tmp_path: Path, tamesu, serve) -> None:
    url = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).url
    (tmp_path / ".env").write_text(f"TOKEN='{SECRET}'\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  text: {{ type: rest, url: "{url}/chat", max_response_bytes: {LIMIT},
          headers: {{ X-Token: "{{{{secrets.TOKEN}}}}" }} }}
  json: {{ type: rest, url: "{url}/chat?json=1", max_response_bytes: {LIMIT},
          headers: {{ X-Token: "{{{{secrets.TOKEN}}}}" }} }}
tests:
  - {{ name: text, target: text, scenario: {{ script: [ {{ say: hi }} ] }} }}
  - {{ name: json, target: json, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "-vv", "--out", "out"], cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said  # the cut JSON answer fails its turn
    head = SECRET[:7]
    assert head not in said, said
    run = next(p.parent for p in (tmp_path / "out").rglob("run.json"))
    text = json.loads((run / "suite/text/run-1/transcript.json").read_text())
    assert text["lines"][-1]["text"].endswith("x ***"), text["lines"][-1]
    detail = json.loads((run / "suite/json/run-1/result.json").read_text())
    [stand_in] = detail["turns"][0]["agent"]["raw"]
    assert stand_in["excerpt"].endswith("x ***"), stand_in
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert head.encode() not in path.read_bytes(), path
