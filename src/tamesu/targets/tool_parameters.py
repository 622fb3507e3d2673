"""A model target tool's `parameters`, checked where written: the providers take only a JSON Schema of an object
(the arguments are one JSON object), and refused it only when the run asked them, an exit 3 blamed on the model."""

from __future__ import annotations

from typing import Annotated

from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import AfterValidator

_ANNOTATIONS = frozenset({
    "$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary", "$comment", "$defs", "definitions", "title",
    "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "contentMediaType",
    "contentEncoding", "contentSchema"})
"""Keywords a schema may carry that no validator reads (jsonschema's validators name the others)."""


def _object_schema(value: dict[str, object]) -> dict[str, object]:
    if "properties" not in value:
        # arguments written without `properties:` above them are unknown keywords to JSON Schema, which ignores
        # them: the model would be offered a tool that takes no arguments
        keywords = set(validator_for(value).VALIDATORS) | _ANNOTATIONS
        stray = [key for key, schema in value.items()
                 if isinstance(schema, dict) and key not in keywords and not key.startswith("x-")]
        if stray:
            raise ValueError(f"{stray[0]} is no JSON Schema keyword: the arguments go under properties (parameters: "
                             f"{{type: object, properties: {{{stray[0]}: ...}}}})")
    kind = value.get("type")
    # no `type` is taken as an object's schema (features.md): only another type is a mistake
    if kind is not None and kind != "object":
        raise ValueError(f"a tool's parameters are the JSON Schema of one object (its arguments): type must be "
                         f"'object', got {kind!r}")
    try:
        validator_for(value).check_schema(value)
    except SchemaError as exc:
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in exc.absolute_path)
        raise ValueError(f"not a JSON Schema: {exc.message} (at parameters{where})") from None
    return value


ToolParameters = Annotated[dict[str, object], AfterValidator(_object_schema)]
"""A tool's `parameters`: a JSON Schema whose type, when written, is object."""
