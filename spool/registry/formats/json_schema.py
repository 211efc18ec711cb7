"""JSON Schema for the registry: ``FORMAT`` (schemaType ``JSON``).

parse
    The text must be JSON (an object or a boolean; NaN and Infinity refused) and a valid
    schema for the draft its ``$schema`` names: drafts 4, 6, 7, 2019-09 and 2020-12, draft 7
    when there is none (Confluent's default); another ``$schema`` is refused. Validity is
    ``jsonschema``'s meta-schema check (with its format checker, so a bad ``pattern``
    regex is refused too). Every ``$ref`` must resolve: within the document, or to a
    referenced schema by the reference's ``name`` (``"$ref": "customer.json"`` or
    ``"customer.json#/$defs/address"``; a name joined onto the document's ``$id`` base
    is found by its last segments too), or by a referenced schema's own ``$id``. A
    referenced schema is itself checked against its draft. Failures raise
    ``model.InvalidSchema`` naming the place; so does nesting deeper than the checks
    recurse (about 150 levels).
canonical
    The document re-serialised with sorted keys and no whitespace (``ensure_ascii``
    off): two texts differing only in layout or key order are one schema.
incompatibilities(reader, writer)
    Confluent's JSON Schema rules (``json_diff``'s docstring lists them): why a document
    valid against ``writer`` may be refused by ``reader``. Each message is Confluent's
    ``Found incompatible change: Difference{jsonPath='#/...', type=TYPE_NAME}``. Schemas
    too deep or too large to compare (``json_diff.BUDGET`` schema pairs, ~2 s) are
    reported incompatible, never a crash or a stall.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema_specifications
from jsonschema import validators
from referencing import Registry, Resource, Specification
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT7, specification_with

from spool.registry.formats import json_diff
from spool.registry.model import InvalidSchema

DEFAULT_DRAFT = jsonschema.Draft7Validator  # Confluent's, for a schema without $schema


@dataclass(frozen=True, eq=False)
class JsonSchema:
    """A parsed schema: the document, its draft, and how its ``$ref``s resolve."""

    document: Any
    specification: Specification[Any]
    registry: Registry[Any]

    def root(self) -> json_diff.Node:
        resource = self.specification.create_resource(self.document)
        resolver = self.registry.resolver_with_root(resource)
        return json_diff.Node(self.document, resolver, self.specification)


class _JsonFormat:
    name = "JSON"

    def parse(self, schema: str, references: Mapping[str, str]) -> JsonSchema:
        try:
            return self._parse(schema, references)
        except RecursionError:
            raise InvalidSchema("schema nested too deeply") from None

    def _parse(self, schema: str, references: Mapping[str, str]) -> JsonSchema:
        document = _load(schema, "schema")
        spec = _check(document, "schema")
        resources: dict[str, Resource[Any]] = {}
        for name, text in references.items():
            ref_doc = _load(text, f"reference {name!r}")
            ref_spec = _check(ref_doc, f"reference {name!r}")
            resource = ref_spec.create_resource(ref_doc)
            resources[name] = resource
            if isinstance(ref_doc, dict) and isinstance(ref_doc.get("$id"), str):
                resources.setdefault(ref_doc["$id"].rstrip("#"), resource)
        registry: Registry[Any] = Registry(retrieve=_retriever(resources)).with_resources(
            resources.items())
        parsed = JsonSchema(document, spec, registry)
        _check_refs(parsed.root())
        return parsed

    def canonical(self, parsed: JsonSchema) -> str:
        return canonical_text(parsed.document)

    def incompatibilities(self, reader: JsonSchema, writer: JsonSchema) -> list[str]:
        try:
            return json_diff.incompatibilities(reader.root(), writer.root())
        except RecursionError:
            return ["Found incompatible change: the schemas are nested too deeply to compare"]


FORMAT = _JsonFormat()


def canonical_text(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load(text: str, what: str) -> Any:
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, TypeError) as e:
        raise InvalidSchema(f"{what} is not JSON: {e}") from None
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema(f"{what} must be a JSON object or boolean, not "
                            f"{type(document).__name__}")
    return document


def _check(document: Any, what: str) -> Specification[Any]:
    """The document's draft, after checking it against that draft's meta-schema."""
    cls: Any = DEFAULT_DRAFT
    if isinstance(document, dict) and "$schema" in document:
        if not isinstance(document["$schema"], str):
            raise InvalidSchema(f"{what}: $schema must be a string")
        cls = validators.validator_for(document, default=None)
        if cls is None:
            raise InvalidSchema(f"{what}: unknown $schema {document['$schema']!r}")
    try:
        cls.check_schema(document)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        raise InvalidSchema(f"{what} at #/{where}: {e.message}") from None
    return specification_with(cls.META_SCHEMA["$schema"], default=DRAFT7)


def _retriever(resources: Mapping[str, Resource[Any]]) -> Any:
    """Finds a URI the registry does not hold: a reference name at the end of a URI
    (a name joined onto the referring document's base), else a meta-schema."""

    def retrieve(uri: str) -> Resource[Any]:
        for name, resource in resources.items():
            if uri.endswith("/" + name.lstrip("/")):
                return resource
        try:
            return jsonschema_specifications.REGISTRY[uri]
        except LookupError:
            raise NoSuchResource(ref=uri) from None

    return retrieve


def _check_refs(root: json_diff.Node) -> None:
    """Resolves every ``$ref`` reachable from ``root`` (other documents included, each
    once), raising ``InvalidSchema`` for the first that does not resolve."""
    seen: set[int] = set()
    pending = [(root, "#")]
    while pending:
        node, path = pending.pop()
        if id(node.schema) in seen:
            continue
        seen.add(id(node.schema))
        for child, child_path in _walk(node, path):
            ref = child.schema.get("$ref") if isinstance(child.schema, dict) else None
            if not isinstance(ref, str):
                continue
            try:
                target = child.lookup(ref)
            except Unresolvable:
                raise InvalidSchema(f"$ref {ref!r} at {child_path} does not resolve (not in "
                                    f"the document nor among the references)") from None
            pending.append((target, ref))


def _walk(node: json_diff.Node, path: str) -> Iterator[tuple[json_diff.Node, str]]:
    yield node, path
    for key, child in json_diff.subschemas(node):
        yield from _walk(child, f"{path}/{key}")
