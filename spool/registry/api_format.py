"""The ``format`` and ``normalize`` query parameters: a schema's text as a client asks for it.

``format`` (on ``GET /schemas/ids/{id}[/schema]``, ``GET /subjects/{s}/versions/{v}
[/schema]``, ``POST /subjects/{s}`` and ``GET /schemas``), Confluent's values:

  PROTOBUF ``serialized``  the base64 of the schema's ``FileDescriptorProto`` (what
                           confluent-kafka's ``ProtobufDeserializer``, and its serializer
                           with ``use.latest.version``, ask for and base64-decode), however
                           the schema was registered (``.proto`` text or a descriptor);
                           the references stay in the answer's ``references``, each file
                           importing the others by their reference names.
  AVRO     ``resolved``    the schema with each named type that a reference brings in
                           defined where it is first used (a self-contained schema), in
                           the registry's normalised form (full names, attributes in a
                           fixed order, Parsing Canonical Form's first).
Any other value (``default``, ``ignore_extensions``, a format of another type, an unknown
one) answers the schema as registered, as Confluent's does.

``normalize=true`` on ``POST /subjects/{s}/versions`` registers the schema's normalised
text (Avro: full names, attributes in that fixed order, no whitespace; JSON: keys
sorted, no whitespace) instead of the text sent. A PROTOBUF schema keeps its text: there is no
``.proto`` printer here, and the registry's identity (the compiled descriptor) already
treats the same schema written otherwise as one, so the id is the one normalisation
would give. Lookups and compatibility checks compare normalised forms whatever the
parameter says, so ``normalize`` changes nothing there.

References are resolved through the registry's own reads (``Registry.version``,
soft-deleted versions included, transitively), as the registry resolves them on
registration. Parsing (protoc for PROTOBUF) runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from spool.registry import model
from spool.registry.formats import formats


async def resolve(registry: model.Registry,
                  references: tuple[model.Reference, ...] | list[model.Reference]
                  ) -> dict[str, str]:
    """name -> text of every schema ``references`` names, transitively."""
    texts: dict[str, str] = {}
    pending = list(references)
    seen: set[tuple[str, int]] = set()
    while pending:
        ref = pending.pop()
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        try:
            target = await registry.version(ref.subject, ref.version, True)
        except model.RegistryError as e:
            if e.status != 404:
                raise
            raise model.invalid_schema(f"the reference {ref.name!r} to subject "
                                       f"'{ref.subject}' version {ref.version} is not "
                                       "found") from None
        texts.setdefault(ref.name, target.schema)
        pending.extend(target.references)
    return texts


async def _parsed(registry: model.Registry, schema: str, schema_type: str,
                  references: tuple[model.Reference, ...] | list[model.Reference]
                  ) -> tuple[Any, Any]:
    fmt = formats()[schema_type]
    texts = await resolve(registry, references)
    return fmt, await asyncio.to_thread(fmt.parse, schema, texts)


async def rendered(registry: model.Registry, sv: model.SchemaVersion,
                   fmt: str | None) -> str:
    """``sv``'s schema text in the ``format`` asked for (module doc)."""
    wanted = (fmt or "").strip().lower()
    if sv.schema_type == "PROTOBUF" and wanted == "serialized":
        proto, parsed = await _parsed(registry, sv.schema, sv.schema_type, sv.references)
        return str(proto.serialized(parsed))
    if sv.schema_type == "AVRO" and wanted == "resolved" and sv.references:
        _, parsed = await _parsed(registry, sv.schema, sv.schema_type, sv.references)
        return json.dumps(_inlined(parsed.root, parsed.named, set()),
                          separators=(",", ":"), ensure_ascii=False)
    return sv.schema


async def formatted(registry: model.Registry, sv: model.SchemaVersion,
                    fmt: str | None) -> model.SchemaVersion:
    """``sv`` with its schema as ``rendered`` gives it."""
    text = await rendered(registry, sv, fmt)
    if text == sv.schema:
        return sv
    return model.SchemaVersion(sv.subject, sv.version, sv.id, text, sv.schema_type,
                               sv.references, sv.deleted)


async def normalized(registry: model.Registry, schema: str, schema_type: str,
                     references: list[model.Reference]) -> str:
    """The text ``normalize=true`` registers (module doc); 42201 when it does not parse."""
    if schema_type == "PROTOBUF":
        return schema
    try:
        fmt, parsed = await _parsed(registry, schema, schema_type, references)
    except model.InvalidSchema as e:
        raise model.invalid_schema(str(e)) from e
    return str(fmt.canonical(parsed))


def _inlined(node: Any, named: Any, defined: set[str]) -> Any:
    """An Avro parsed ``node`` (avro.AvroSchema's rewritten form: full names, named
    types referred to by name once defined) with a name not yet defined in this output
    replaced by its definition, attributes ordered as the registry's normalised form."""
    from spool.registry.formats.avro import PRIMITIVES, _normalized

    if isinstance(node, str):
        if node in PRIMITIVES or node in defined or node not in named:
            return node
        return _inlined(named[node], named, defined)
    if isinstance(node, list):
        return [_inlined(branch, named, defined) for branch in node]
    if not isinstance(node, dict):
        return node
    if "name" in node and node.get("type") in ("record", "error", "enum", "fixed"):
        defined.add(node["name"])
    out = json.loads(json.dumps(_normalized(node)))  # a copy, attributes in their order
    for key in ("items", "values"):
        if key in node:
            out[key] = _inlined(node[key], named, defined)
    if "fields" in node:
        for field_out, field in zip(out["fields"], node["fields"], strict=True):
            field_out["type"] = _inlined(field["type"], named, defined)
    return out
