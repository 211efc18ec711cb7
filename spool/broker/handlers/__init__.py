"""Request handlers, one module per API family; importing this registers them all."""

from spool.broker.handlers import (  # noqa: F401
    admin,
    api_versions,
    configs,
    controller,
    coordinator,
    describe_topic_partitions,
    features,
    fetch,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    partition_admin,
    produce,
    producer_id,
    producers,
    quorum,
    transactions,
    txn_markers,
)
