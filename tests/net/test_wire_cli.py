"""TLS as `tamesu run` reports it: an agent or a model server whose certificate is not trusted is one line naming
the host and the reason, exit 3 (an infrastructure error); the same run passes with the CA given as `tls.ca_file`
or SSL_CERT_FILE; `verify: false` passes with a warning on the run; a `tls:` file that does not exist is one
line, exit 3. Real HTTPS servers on 127.0.0.1 with a CA made here (trustme)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from model_servers import OpenAIServer, text


async def _desk(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"Your order ships Friday (you said: {(await request.json())['message']})"})


class HttpsServer:
    """An ASGI app over HTTPS on 127.0.0.1, in a thread."""

    def __init__(self, app: Any, ca: trustme.CA, tmp: Path) -> None:
        leaf = ca.issue_cert("127.0.0.1")
        leaf.cert_chain_pems[0].write_to_path(str(tmp / "server.pem"))
        leaf.private_key_pem.write_to_path(str(tmp / "server.key"))
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", ssl_certfile=str(tmp / "server.pem"),
                                ssl_keyfile=str(tmp / "server.key"), ssl_cert_reqs=ssl.CERT_NONE)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        while not self.server.started:
            self._thread.join(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"https://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(10)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def agent(ca: trustme.CA, tmp_path: Path) -> Iterator[str]:
    with HttpsServer(Starlette(routes=[Route("/chat", _desk, methods=["POST"])]), ca, tmp_path) as url:
        yield url


def _suite(tmp_path: Path, url: str, tls: str = "") -> None:
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{url}/chat"{tls}, connect: {{ attempts: 1 }} }}
tests:
  - name: ships
    target: desk
    scenario: {{ script: [{{ say: "when does it ship?" }}] }}
    assert: [{{ contains: Friday }}]
""")


def _run(tmp_path: Path, **env: str) -> tuple[int, str]:
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path,
                      env={"SSL_CERT_FILE": "", "SSL_CERT_DIR": "", **env})
    return done.returncode, done.stdout + done.stderr


def _error(tmp_path: Path) -> str:
    [line] = [json.loads(x) for found in (tmp_path / "out").glob("*/results.jsonl")
              for x in found.read_text().splitlines()]
    return str(line["runs"][0]["error"])


def test_an_agent_with_an_untrusted_certificate_is_one_line_and_exit_3(agent: str, tmp_path: Path) -> None:
    _suite(tmp_path, agent)
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert "TLS: the certificate's CA is not trusted" in error and "127.0.0.1" in error, error
    assert "\n" not in error and "Traceback" not in output


def test_a_certificate_refused_is_not_tried_again(agent: str, tmp_path: Path) -> None:
    # `connect` retries what may heal (refused, unresolved, timed out); a certificate was refused 3 times, a
    # second apart, and said "after 3 attempts"
    _suite(tmp_path, agent)
    (tmp_path / "suite.yaml").write_text((tmp_path / "suite.yaml").read_text().replace("attempts: 1", "attempts: 3"))
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert error == (f"rest target desk: cannot reach {agent}/chat: TLS: the certificate's CA is not trusted (give "
                     "it with tls.ca_file or SSL_CERT_FILE) (unable to get local issuer certificate)"), error
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json")]
    assert not [event for event in record["events"] if event["name"] == "connect_retry"], record["events"]


def test_https_to_a_plain_http_server_says_so(tmp_path: Path, serve) -> None:
    # before: "TLS handshake failed: WRONG_VERSION_NUMBER", OpenSSL's word for an answer that is not TLS: the
    # url's https:// (or wss://) for an agent that speaks plain HTTP on that port
    plain = serve(Starlette(routes=[Route("/chat", _desk, methods=["POST"])])).url
    _suite(tmp_path, plain.replace("http://", "https://"))
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert "TLS handshake failed: the server answered without TLS (plain HTTP on that port?): is the url's scheme " \
           "http:// or ws://? (WRONG_VERSION_NUMBER)" in error, error


def test_the_ca_given_as_tls_ca_file_or_ssl_cert_file_passes(agent: str, ca: trustme.CA, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    _suite(tmp_path, agent, ', tls: { ca_file: ca.pem }')
    code, output = _run(tmp_path)
    assert code == 0, output
    _suite(tmp_path, agent)
    code, output = _run(tmp_path, SSL_CERT_FILE=str(tmp_path / "ca.pem"))
    assert code == 0, output


def test_verify_false_passes_with_a_warning(agent: str, tmp_path: Path) -> None:
    _suite(tmp_path, agent, ', tls: { verify: false }')
    code, output = _run(tmp_path)
    assert code == 0, output
    assert "TLS certificates are not checked" in output


def test_a_tls_file_that_does_not_exist_is_one_line(agent: str, tmp_path: Path) -> None:
    _suite(tmp_path, agent, ', tls: { ca_file: nowhere.pem }')
    code, output = _run(tmp_path)
    assert code == 3, output
    assert "tls.ca_file: no such file: nowhere.pem" in output + _error(tmp_path)
    assert "Traceback" not in output


def test_validate_warns_of_a_tls_file_that_is_not_here_and_still_passes(tmp_path: Path) -> None:
    # a warning, not a problem: a certificate may be mounted only for the run (a CI secret after a lint step)
    _suite(tmp_path, "https://127.0.0.1:9", ', tls: { ca_file: nowhere.pem, cert_file: "~/no/c.pem", key_file: '
                                           'here.key }')
    (tmp_path / "here.key").write_text("not read by validate")
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "targets.desk.tls.ca_file: no such file here: nowhere.pem (a relative path is from the folder" in output
    assert "targets.desk.tls.cert_file: no such file here: ~/no/c.pem: a run" in output
    assert "key_file" not in output


def test_a_model_server_with_an_untrusted_certificate_is_one_line_and_exit_3(ca: trustme.CA,
                                                                             tmp_path: Path) -> None:
    models = OpenAIServer()
    models.plan(text(json.dumps({"input": "hi", "goal_achieved": True, "stop": False, "reasoning": "done"})))
    with HttpsServer(models.app, ca, tmp_path) as url, \
            HttpsServer(Starlette(routes=[Route("/chat", _desk, methods=["POST"])]), trustme.CA(), tmp_path) as desk:
        (tmp_path / "suite.yaml").write_text(f"""\
models:
  simulator: {{ provider: openai, model: m, base_url: "{url}/v1", api_key: sk-x, max_retries: 0 }}
targets:
  desk: {{ type: rest, url: "{desk}/chat", tls: {{ verify: false }} }}
tests:
  - name: ships
    target: desk
    persona: {{ name: Ada }}
    scenario: {{ goal: "find out when it ships", max_turns: 1 }}
""")
        code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert "openai:m: cannot reach" in error and "TLS: the certificate's CA is not trusted" in error, error
    assert "\n" not in error


def _hooked_suite(tmp_path: Path, url: str, hook_tls: str = "", check_tls: str = "") -> None:
    (tmp_path / "suite.yaml").write_text(f"""\
hooks:
  before_all: [{{ http: {{ url: "{url}/chat", method: POST, body: {{ message: seed }}{hook_tls} }} }}]
targets:
  desk: {{ type: rest, url: "{url}/chat", tls: {{ ca_file: ca.pem }} }}
tests:
  - name: ships
    target: desk
    scenario: {{ script: [{{ say: "when does it ship?" }}] }}
    assert:
      - http: {{ url: "{url}/chat", method: POST, body: {{ message: status }}, contains: Friday{check_tls} }}
""")


def test_hooks_and_the_http_check_take_a_tls_block(agent: str, ca: trustme.CA, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    _hooked_suite(tmp_path, agent, ", tls: { ca_file: ca.pem }", ", tls: { ca_file: ca.pem }")
    code, output = _run(tmp_path)
    assert code == 0, output


def test_a_hook_to_an_untrusted_server_is_one_line_naming_the_reason(agent: str, ca: trustme.CA,
                                                                    tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    _hooked_suite(tmp_path, agent, check_tls=", tls: { ca_file: ca.pem }")
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert error.startswith(f"before_all hook 1: POST {agent}/chat: TLS: the certificate's CA is not trusted"), error
    assert "\n" not in error and "Traceback" not in output


def test_an_http_check_to_an_untrusted_server_is_an_infrastructure_error(agent: str, ca: trustme.CA,
                                                                         tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    _hooked_suite(tmp_path, agent, hook_tls=", tls: { ca_file: ca.pem }")
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert error.startswith(f"http: POST {agent}/chat: TLS: the certificate's CA is not trusted"), error
    assert "\n" not in error and "Traceback" not in output


def test_http_to_an_https_server_says_so(agent: str, tmp_path: Path) -> None:
    # before: "POST http://.../chat failed: Server disconnected without sending a response.", the agent's failed
    # turn (exit 1): a TLS server closes a connection that sends it plain HTTP, and the url's scheme was wrong
    _suite(tmp_path, agent.replace("https://", "http://"))
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert error == (f"rest target desk: POST {agent.replace('https://', 'http://')}/chat: the server closed the "
                     "connection without answering, and it speaks TLS on that port: is the url's scheme https:// "
                     "(or wss://)?"), error


def test_ws_to_an_https_server_says_so(agent: str, tmp_path: Path) -> None:
    # before: "websocket ws://...: did not receive a valid HTTP response", no cause named
    url = agent.replace("https://", "ws://") + "/chat"
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{url}", streaming: websocket, connect: {{ attempts: 1 }} }}
tests:
  - {{ name: ships, target: desk, scenario: {{ script: [{{ say: "when does it ship?" }}] }} }}
""")
    code, output = _run(tmp_path)
    assert code == 3, output
    error = _error(tmp_path)
    assert error == (f"rest target desk: websocket {url}: the server closed the connection without answering, and "
                     "it speaks TLS on that port: is the url's scheme https:// (or wss://)?"), error
