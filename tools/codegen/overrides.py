"""Version ranges (and fields) Spool needs beyond what the spec files declare.

Kafka 4 dropped old versions from the specs, but the fields keep their
original ``versions`` annotations, so the old layouts can still be derived.

* Produce (api key 0): the JSON says 3-13. Spool must decode Produce
  requests v0-2 and encode the v0-2 responses (it advertises Produce from 0
  for old librdkafka, then answers a real v0-2 request with
  UNSUPPORTED_VERSION). v0-2 requests lack ``TransactionalId`` (3+); v0
  responses lack ``ThrottleTimeMs`` (1+) and ``LogAppendTimeMs`` (2+). The
  records of v0-1 are message sets (magic 0/1), which are still opaque bytes.

* Vote (api key 52): the vendored specs (apache/kafka 1eb7644349cb) stop at
  v1; Kafka 4.0 added v2 for KIP-996 pre-vote, which the cluster's Raft
  needs: v2 = v1 plus ``PreVote`` (bool, non-tagged) as the last field of
  the request's ``PartitionData``; the response is v1's layout. Checked
  against kio 0.6.5's generated v2 types (field order and types) and its
  encoder (byte-identical for the same content); see
  tests/unit/test_kraft_apis.py.

``VALID_VERSIONS`` maps a spec name to its replacement ``validVersions``;
``ADDED_FIELDS`` maps (spec name, struct name) to spec fields appended to
that struct (the struct name is the spec name for the top level).
"""

from __future__ import annotations

VALID_VERSIONS: dict[str, str] = {
    'ProduceRequest': '0-13',
    'ProduceResponse': '0-13',
    'VoteRequest': '0-2',
    'VoteResponse': '0-2',
}

ADDED_FIELDS: dict[tuple[str, str], list[dict]] = {
    ('VoteRequest', 'PartitionData'): [
        {'name': 'PreVote', 'type': 'bool', 'versions': '2+',
         'about': 'Whether the request is a PreVote request (not persisted) or not.'},
    ],
}
