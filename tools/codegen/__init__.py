"""Kafka JSON message specs -> ``spool/protocol/_generated`` (straight-line codecs).

``python -m tools.codegen`` regenerates the package; ``--check`` compares
the output with the committed files and exits 1 on any difference.

Sources: the specs bundled with the installed kafka-python wheel, plus the
Apache Kafka specs vendored in ``tools/codegen/specs`` for what kafka-python
lacks (KRaft APIs, Raft control records, metadata records; see its README).

Modules: ``jsonc`` (comment stripping), ``schema`` (spec model and loader),
``overrides`` (version ranges extended beyond the bundled JSON), ``naming``,
``emit_codec`` (per-version encode/decode bodies), ``emit_module`` (classes,
modules and the registry), ``__main__`` (CLI), ``strategies`` (Hypothesis
strategies for the generated classes, derived from the same specs; tests only).
"""
