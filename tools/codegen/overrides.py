"""Version ranges Spool needs beyond what the bundled JSON declares.

Kafka 4 dropped old versions from the specs, but the fields keep their
original ``versions`` annotations, so the old layouts can still be derived.

* Produce (api key 0): the JSON says 3-13. Spool must decode Produce
  requests v0-2 and encode the v0-2 responses (it advertises Produce from 0
  for old librdkafka, then answers a real v0-2 request with
  UNSUPPORTED_VERSION). v0-2 requests lack ``TransactionalId`` (3+); v0
  responses lack ``ThrottleTimeMs`` (1+) and ``LogAppendTimeMs`` (2+). The
  records of v0-1 are message sets (magic 0/1), which are still opaque bytes.

Each entry maps a spec name to its replacement ``validVersions``.
"""

from __future__ import annotations

VALID_VERSIONS: dict[str, str] = {
    'ProduceRequest': '0-13',
    'ProduceResponse': '0-13',
}
