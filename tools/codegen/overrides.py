"""What Spool's codec needs beyond Kafka 4.2's specs.

* ``JSON_APIS``: API messages generated from the JSON vendored in
  ``tools/codegen/specs/message`` instead of kio, because Spool serves
  versions Kafka 4.2 dropped, which kio's per-version classes no longer
  describe. At the versions Kafka 4.2 has, tests/unit/test_kio_crosscheck.py
  holds them to kio like every other API.

  - Produce (api key 0; kafka-python 3.0.12's copy of Kafka's JSON, the same
    as 4.2 at 3-13): the JSON says 3-13. Spool must decode Produce requests
    v0-2 and encode the v0-2 responses (it advertises Produce from 0 for old
    librdkafka, then answers a real v0-2 request with UNSUPPORTED_VERSION).
    Kafka 4 dropped v0-2 from the spec but its fields keep their original
    ``versions`` annotations, so the old layouts follow: v0-2 requests lack
    ``TransactionalId`` (3+); v0 responses lack ``ThrottleTimeMs`` (1+) and
    ``LogAppendTimeMs`` (2+). The records of v0-1 are message sets (magic
    0/1), which are still opaque bytes. ``VALID_VERSIONS`` extends it.
  - AlterPartition (api key 56; apache/kafka 1eb7644): Kafka 4.0 dropped v0-1
    (``TopicName`` instead of ``TopicId``, ``NewIsr`` without epochs); Spool's
    controller still accepts 0-3.

``VALID_VERSIONS`` maps a spec name to its replacement ``validVersions``.
"""

from __future__ import annotations

JSON_APIS: frozenset[str] = frozenset({
    'ProduceRequest', 'ProduceResponse', 'AlterPartitionRequest', 'AlterPartitionResponse',
})

VALID_VERSIONS: dict[str, str] = {
    'ProduceRequest': '0-13',
    'ProduceResponse': '0-13',
}
