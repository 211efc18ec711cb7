"""Kafka 4.2's message specs -> ``spool/protocol/_generated`` (straight-line codecs).

``python -m tools.codegen`` regenerates the package; ``--check`` compares
the output with the committed files and exits 1 on any difference.

Sources (decided for issue 15; see ``tools/codegen/specs/README.md``):

* every API request and response: Kafka 4.2's schemas as kio 0.6.5 (PyPI,
  pinned as a dev dependency) publishes them, one Python class per message
  version, folded back into Kafka's JSON spec format by ``kio_specs``;
* the JSON vendored in ``tools/codegen/specs``: the ``__cluster_metadata``
  records, the Raft control records and the consumer protocol structs (none
  of which kio has, or has as an API), and the two APIs whose versions Kafka
  4.2 dropped but Spool still serves (Produce v0-2, AlterPartition v0-1;
  ``overrides.JSON_APIS``).

The switch to kio regenerated every API that kafka-python's or the vendored
JSON already had to the same code (docstrings aside), except where Kafka 4.2
differs: fields only on the wire at versions Kafka 4 dropped are gone, and
Vote's ``Candidate*`` fields are Kafka 4.2's ``Replica*``.
``tests/unit/test_kio_crosscheck.py`` holds the whole codec to kio's own
serializer.

Modules: ``jsonc`` (comment stripping), ``kio_specs`` (kio's classes -> spec
dicts), ``schema`` (spec model and loader), ``overrides`` (what Spool needs
beyond Kafka 4.2), ``naming``, ``emit_codec`` (per-version encode/decode
bodies), ``emit_module`` (classes, modules and the registry), ``__main__``
(CLI), ``strategies`` (Hypothesis strategies for the generated classes,
derived from the same specs; tests only).
"""
