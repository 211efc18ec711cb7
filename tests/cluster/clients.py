"""What each real client sees of the cluster: brokers with racks and the controller id.

Each function asks through one client library with ``bootstrap`` (one node's
listener, so the answer is that node's view) and returns
``(brokers: {id: rack}, controller_id)``; kcat does not print racks, so its
racks are None.
"""

from __future__ import annotations

import json
import subprocess


def confluent_view(bootstrap: str) -> tuple[dict[int, str | None], int]:
    """confluent-kafka (librdkafka): DescribeCluster through AdminClient.describe_cluster()."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    r = admin.describe_cluster(request_timeout=10).result(timeout=15)
    return {n.id: n.rack for n in r.nodes}, r.controller.id


def confluent_metadata_view(bootstrap: str) -> tuple[dict[int, str | None], int]:
    """confluent-kafka: Metadata through AdminClient.list_topics() (no racks in its model)."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b: None for b in md.brokers}, md.controller_id


def kafka_python_view(bootstrap: str) -> tuple[dict[int, str | None], int]:
    """kafka-python: KafkaAdminClient.describe_cluster() (Metadata)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        d = admin.describe_cluster()
    finally:
        admin.close()
    return {b["broker_id"]: b["rack"] for b in d["brokers"]}, d["controller_id"]


def kcat_view(bootstrap: str) -> tuple[dict[int, str | None], int]:
    """kcat -L -J: the brokers and controller id librdkafka got from Metadata."""
    out = subprocess.run(["kcat", "-L", "-J", "-b", bootstrap, "-m", "10"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    md = json.loads(out.stdout)
    return {b["id"]: None for b in md["brokers"]}, md["controllerid"]
