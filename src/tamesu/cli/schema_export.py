"""`tamesu schema`: JSON Schemas of a suite and of tamesu.yaml, for editors (yaml-language-server and others).

They are generated from the pydantic models the loader validates with: the suite and project models, each
implemented target type's spec and each assertion's spec, so a key the loader accepts is a key the editor
completes. Two places where pydantic's schema would be stricter than the loader are widened:

- a duration (`10s`, `500ms`, or seconds) is a number or such a string;
- a boolean may be written as pydantic reads one: `1`, `yes`, `on`...;
- a model that accepts a shorthand before validating (`hooks: ["./seed.sh"]`, `judge: "openai:gpt-4o"`,
  `contains: "shipped"`) also accepts a non-object value. The editor then checks the long form in full and
  leaves the shorthand to `tamesu validate`, which always has the last word. A before-validator that only
  refuses more (`types.narrows`: `turns: true`) keeps its field's own type, and `suites` is what the loader
  takes: a list of globs, `[]` for a project with no suites of its own (JSONL tests, suites given as paths).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

from tamesu import __version__, checks, plugins, targets
from tamesu.suite.schema import ProjectSpec, SuiteSpec, TestSpec
from tamesu.types import parse_duration

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# The modeline `tamesu init` writes points at these files, relative to the suite or tamesu.yaml.
SCHEMA_DIR = ".tamesu/schema"
FILES = {"suite": "suite.schema.json", "project": "project.schema.json"}

_DURATION = {"anyOf": [{"type": "number", "minimum": 0},
                       {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"}],
             "description": "a duration: 500ms, 10s, 2m, 1h, or a number of seconds"}
_NOT_OBJECT = {"not": {"type": "object"}}


def _any_case(words: list[str]) -> str:
    # JSON Schema patterns have no case-insensitive flag: spell each letter as a class
    spelled = ("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in w) for w in words)
    return "^(" + "|".join(spelled) + ")$"


# What pydantic's lax mode reads as a boolean besides true/false (YAML 1.2 leaves `yes` and `on` strings).
_BOOLEAN = {"anyOf": [{"type": "boolean"}, {"enum": [0, 1]},
                      {"type": "string", "pattern": _any_case(["true", "false", "yes", "no", "on", "off",
                                                                "t", "f", "y", "n", "1", "0"])}]}


class _Lenient(GenerateJsonSchema):
    """pydantic's generator, with what a before-validator accepts made explicit (see the module's notes),
    and a bare `bool` (a plug-in's) as lax as the loader reads it (`strict: 1`, `ignore_case: yes`)."""

    def bool_schema(self, schema: core_schema.BoolSchema) -> JsonSchemaValue:
        # `YamlBool`, every boolean of tamesu's own models: true or false only (a plug-in's bare `bool` is lax)
        if schema.get("strict"):
            return {"type": "boolean"}
        return copy.deepcopy(_BOOLEAN)

    def function_before_schema(self, schema: core_schema.BeforeValidatorFunctionSchema) -> JsonSchemaValue:
        function = schema["function"]["function"]
        if function is parse_duration:
            return copy.deepcopy(_DURATION)
        inner = super().function_before_schema(schema)
        if getattr(getattr(function, "__func__", function), "__tamesu_narrows__", False):
            return inner
        return {"anyOf": [inner, _NOT_OBJECT]}

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        """A model that names its shorthands (`SHORTHAND_SCHEMA`, e.g. the caller packs a persona's
        `behaviors:` may name) gets them instead of "anything but an object"."""
        generated = super().model_schema(schema)
        shorthand = getattr(schema["cls"], "SHORTHAND_SCHEMA", None)
        branches = generated.get("anyOf")
        if isinstance(shorthand, dict) and isinstance(branches, list) and _NOT_OBJECT in branches:
            generated["anyOf"] = [copy.deepcopy(shorthand) if b == _NOT_OBJECT else b for b in branches]
        return generated


def _closed_inside(schema: dict[str, Any]) -> None:
    """A strict model with a shorthand comes out as `anyOf [object, non-object]` under an outer
    `additionalProperties: false`, which would forbid every key: move it onto the object branch."""
    if schema.get("additionalProperties") is False and "anyOf" in schema and "properties" not in schema:
        del schema["additionalProperties"]
        for branch in schema["anyOf"]:
            if "properties" in branch:
                branch["additionalProperties"] = False


def _target_specs(left_out: list[str]) -> dict[str, type[BaseModel]]:
    specs: dict[str, type[BaseModel]] = {}
    for kind in targets.known_types():
        try:
            specs[kind] = targets.target_class(kind).Spec
        except plugins.PluginError as exc:
            # an installed plug-in that is broken must not cost the user the schema of everything else
            left_out.append(str(exc))
    return specs


_META = {"on_turn": {"anyOf": [{"type": "integer", "minimum": 1}, {"const": "last"}]},
         "name": {"type": "string", "description": "the name reports show"},
         "negate": {"type": "boolean", "description": "pass exactly when the assertion would fail"}}


def _document(root: type[BaseModel], title: str, left_out: list[str]) -> dict[str, object]:
    targets_ = _target_specs(left_out) if root is SuiteSpec else {}
    kinds = {key: checks.check_class(key) for key in checks.known_keys(left_out)}
    # One generation for every model: two models of one name (a target's HandoffSpec and the handoff
    # assertion's) then get distinct $defs instead of one overwriting the other.
    suite_parts: list[type[BaseModel]] = [TestSpec, *targets_.values()] if root is SuiteSpec else []
    models: list[type[BaseModel]] = list(dict.fromkeys([root, *suite_parts, *(c.Spec for c in kinds.values())]))
    refs, top = models_json_schema([(m, "validation") for m in models], by_alias=True,
                                   ref_template="#/$defs/{model}", schema_generator=_Lenient)
    defs: dict[str, Any] = top.get("$defs", {})
    for schema in defs.values():
        _closed_inside(schema)

    def ref(model: type[BaseModel]) -> dict[str, Any]:
        return dict(refs[(model, "validation")])

    document = copy.deepcopy(defs.pop(ref(root)["$ref"].rsplit("/", 1)[-1]))
    assertion_branches = []
    for key, cls in kinds.items():
        value = {"anyOf": [ref(cls.Spec), _NOT_OBJECT]} if cls.shorthand else ref(cls.Spec)
        assertion_branches.append({"type": "object", "required": [key], "additionalProperties": False,
                                   "properties": {key: value, **_META}})
    for key in sorted(checks.FLAT_KINDS & set(kinds)):
        cls = kinds[key]
        spec = defs[ref(cls.Spec)["$ref"].rsplit("/", 1)[-1]]
        # a spec with a shorthand of its own (`evaluator: {name: ...}` or a string) keeps its keys on the
        # object branch of its anyOf (_closed_inside)
        branches = [spec, *spec.get("anyOf", [])]
        fields: dict[str, Any] = next((b["properties"] for b in branches if "properties" in b), {})
        options = {k: v for k, v in fields.items() if k != cls.shorthand}
        # the options written beside the kind (`{evaluator: NAME, min: 0.8}`): at least one, or it is the plain form
        assertion_branches.append({"type": "object", "required": [key], "additionalProperties": False,
                                   "properties": {key: {"type": "string"}, **options, **_META},
                                   "anyOf": [{"required": [option]} for option in options]})
    defs["Assertion"] = {"description": "one assertion kind, with on_turn and name", "oneOf": assertion_branches}
    if targets_:
        defs["Target"] = {
            "type": "object", "required": ["type"],
            "properties": {"type": {"enum": list(targets_), "description": "the target type"}},
            "allOf": [{"if": {"properties": {"type": {"const": kind}}, "required": ["type"]}, "then": ref(spec)}
                      for kind, spec in targets_.items()],
        }
    # the models keep `assert`, `targets` and `tests` as raw data (the loader dispatches them): point them here
    for schema in [document, *defs.values()]:
        prop = schema.get("properties", {}).get("assert")
        if isinstance(prop, dict) and prop.get("type") == "array":
            prop["items"] = {"$ref": "#/$defs/Assertion"}
    props = document.get("properties", {})
    if root is ProjectSpec:
        # `suites:` with nothing or a glob alone: the loader refuses them ("the list is empty", "not a list"); `[]`
        # is a project with no suites of its own (`tamesu test`'s JSONL, or suites given as paths), which the loader
        # takes: only a run or validate given no paths says the list is empty, as it says a glob matched nothing
        props["suites"].pop("anyOf")
        props["suites"].update(type="array", items={"type": "string", "minLength": 1})
    if "targets" in props and targets_:
        props["targets"]["additionalProperties"] = {"$ref": "#/$defs/Target"}
    if "tests" in props and suite_parts:
        props["tests"]["items"] = ref(TestSpec)
        # a suite with one target lets its tests leave it out (the loader fills it in): not for the schema to refuse
        test_schema = defs[ref(TestSpec)["$ref"].rsplit("/", 1)[-1]]
        test_schema["required"] = [key for key in test_schema.get("required", []) if key != "target"]
    about = document.pop("description", "")
    document.pop("title", None)
    return {"$schema": DIALECT, "title": title,
            "description": f"{about} (generated by tamesu {__version__} from the models its loader uses)".strip(),
            **document, "$defs": defs}


def suite_schema(left_out: list[str] | None = None) -> dict[str, object]:
    """`left_out` gets a line for each installed plug-in that could not be put in (it does not load)."""
    return _document(SuiteSpec, "tamesu suite", [] if left_out is None else left_out)


def project_schema(left_out: list[str] | None = None) -> dict[str, object]:
    return _document(ProjectSpec, "tamesu project file (tamesu.yaml)", [] if left_out is None else left_out)


def schemas(left_out: list[str] | None = None) -> dict[str, dict[str, object]]:
    return {"suite": suite_schema(left_out), "project": project_schema(left_out)}


def write_schemas(directory: Path, left_out: list[str] | None = None) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, schema in schemas(left_out).items():
        path = directory / FILES[kind]
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


def left_out_lines(left_out: list[str]) -> list[str]:
    """What `tamesu schema` and `tamesu init` say of the plug-ins the schemas could not hold, each once."""
    return [f"warning: {problem}; left out of the schema" for problem in dict.fromkeys(left_out)]
