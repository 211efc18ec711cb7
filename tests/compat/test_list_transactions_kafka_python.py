"""ListTransactions v2's transactional id pattern (KIP-1152) from kafka-python's admin client.

kafka-python 3 sends ``transactional_id_pattern`` only to a broker advertising v2 (it
refuses the call otherwise): a pattern lists the ids it matches whole, nothing else; a
pattern that does not compile is INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

pytestmark = pytest.mark.timeout(60)


def test_transactional_id_pattern_filters_the_listing(broker):
    prefix = f"lt-{uuid.uuid4().hex[:8]}"
    producers = []
    for suffix in ("a", "b", "ab"):
        tid = f"{prefix}-{suffix}"
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        p.init_transactions(10)
        producers.append(p)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        def listed(pattern: str | None) -> set[str]:
            rows = admin.list_transactions(transactional_id_pattern=pattern)
            ids = {t.transactional_id for per_broker in rows.values() for t in per_broker}
            return {i for i in ids if i.startswith(prefix)}

        everything = {f"{prefix}-a", f"{prefix}-b", f"{prefix}-ab"}
        assert listed(None) == everything
        assert listed("") == everything  # empty: no filter
        esc = re.escape(prefix)
        assert listed(f"{esc}-a.*") == {f"{prefix}-a", f"{prefix}-ab"}
        assert listed(f"{esc}-b") == {f"{prefix}-b"}  # the whole id must match: not -ab
        assert listed("b") == set()
        # kafka-python 3.0.12 has no class for INVALID_REGULAR_EXPRESSION (128): it raises
        # its catch-all with the response in the message
        with pytest.raises(KafkaError, match=r"error_code=128\b"):
            listed("(unclosed")
    finally:
        admin.close()
