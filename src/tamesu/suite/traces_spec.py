"""`traces:`, in a suite or tamesu.yaml: where the agent's own OpenTelemetry spans come from (tamesu.telemetry)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from tamesu.suite.templates import references
from tamesu.types import Duration, HttpHeaders, Strict, YamlInt, split_addr


def _env_or_secrets(text: str) -> str:
    """`text` when its templates are only those filled in as the run starts: the environment and the secrets."""
    for expr, problem in references(text):
        if problem:
            raise ValueError(problem)
        if not expr.startswith(("env.", "secrets.")):
            raise ValueError(f"only {{{{env.NAME}}}} and {{{{secrets.NAME}}}} templates are filled in here, not "
                             f"{{{{{expr}}}}}")
    return text


class TraceQuerySpec(Strict):
    """`traces.query`: the tracing backend the agent already exports to, asked for each turn's trace."""

    jaeger: str | None = None
    """Jaeger's query service (`http://host:16686`): `GET /api/traces/{traceId}`, Jaeger's JSON."""
    tempo: str | None = None
    """Tempo's HTTP API (`http://host:3200`): `GET /api/traces/{traceId}`, OTLP JSON."""
    timeout: Duration = Field(5.0, gt=0)
    """How long one request to the backend may take; a backend that does not answer is an error (exit 3)."""
    headers: HttpHeaders = Field(default_factory=dict)
    """Sent with every request to the backend: a token (`authorization: "Bearer {{secrets.TEMPO_TOKEN}}"`), a
    tenant (`x-scope-orgid`). The URL and these take `{{env.NAME}}` and `{{secrets.NAME}}`, filled in when the
    run starts; a URL's `user:password@` is sent as basic auth. Neither is ever shown."""

    @field_validator("jaeger", "tempo")
    @classmethod
    def _url_templates(cls, value: str | None) -> str | None:
        return None if value is None else _env_or_secrets(value)

    @field_validator("headers")
    @classmethod
    def _header_templates(cls, value: dict[str, str]) -> dict[str, str]:
        for text in value.values():
            _env_or_secrets(text)
        return value

    @model_validator(mode="after")
    def _one_backend(self) -> TraceQuerySpec:
        if (self.jaeger is None) == (self.tempo is None):
            raise ValueError("name one backend: { jaeger: URL } or { tempo: URL }")
        url = self.jaeger or self.tempo or ""
        if not re.match(r"^https?://[^/\s]+", url):
            raise ValueError(f"the backend's URL must start with http:// or https://, got {url[:80]!r}")
        return self

    @property
    def backend(self) -> tuple[str, str]:
        """(kind, base URL without a trailing slash)."""
        return ("jaeger", self.jaeger.rstrip("/")) if self.jaeger else ("tempo", (self.tempo or "").rstrip("/"))


class TracesSpec(Strict):
    """`traces:`: the agent's own OpenTelemetry spans, received while the tests run or fetched from the agent's
    tracing backend after each run (tamesu.telemetry)."""

    receive: str | None = None
    """`host:port` of an OTLP/HTTP receiver (protobuf and JSON) for the run's duration; port 0 picks a free one.
    `{{env.NAME}}` templates are filled in when the run starts (a port a CI job or a script chose).
    Hooks and the commands tamesu starts get OTEL_EXPORTER_OTLP_ENDPOINT pointing at it."""
    query: TraceQuerySpec | None = None
    """Instead of `receive`: fetch each turn's trace from Jaeger or Tempo once the run's turns had `wait`."""
    wait: Duration = 2.0
    """How long after a run's last turn to wait for late spans before it is graded; with `query`, also how
    long a trace the backend does not have yet is asked for again."""
    max_spans: YamlInt = Field(10_000, ge=1, le=10_000_000)
    """Spans kept per run; more are counted in the result, not kept."""

    @model_validator(mode="after")
    def _one_source(self) -> TracesSpec:
        if self.receive is not None and self.query is not None:
            raise ValueError("receive or query, not both: spans come either to tamesu's receiver or from a backend "
                             "it asks")
        if self.receive is None and self.query is None:
            raise ValueError("name where spans come from: receive: host:port, or query: "
                             "{ jaeger: URL } / { tempo: URL }")
        return self

    @field_validator("receive")
    @classmethod
    def _addr(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "{{" not in value:
            split_addr(value)
            return value
        for expr, problem in references(value):
            if problem:
                raise ValueError(problem)
            if not expr.startswith("env."):
                raise ValueError(f"only {{{{env.NAME}}}} templates are filled in here, not {{{{{expr}}}}}")
        return value


def checked_trace_url(value: str | None) -> str | None:
    """tamesu.yaml's `trace_url` when it links each turn to its own trace: `{trace_id}` filled in (not a template)."""
    if value is None:
        return None
    if "{{trace_id}}" in value.replace(" ", ""):
        raise ValueError("write {trace_id}, in single braces, where the trace id goes: it is no template, and "
                         "{{trace_id}} links to {ID}")
    if "{trace_id}" not in value:
        raise ValueError("no {trace_id} in it: every turn would link to the same page; write it where the id "
                         "goes (http://localhost:16686/trace/{trace_id})")
    if not re.match(r"^https?://[^/\s{]+", value):
        raise ValueError(f"a link must start with http:// or https:// and a host, got {value[:80]!r}")
    return value
