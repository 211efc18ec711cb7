"""``snapshot_records(image)``: a whole ``MetadataImage`` written as metadata records.

Raft snapshots of ``__cluster_metadata`` hold these records; replaying them on an
empty image (with the same ``cluster_id``) gives an image equal to the one written
(``MetadataImage.__eq__`` compares the metadata, not the offset). Order, as Kafka's
image writers go: FeatureLevelRecords, then per broker its RegisterBrokerRecord (with
its current fenced and controlled-shutdown state), controllers, per topic its
TopicRecord then its PartitionRecords (current leader epoch and partition epoch), the
ConfigRecords, a ProducerIdsRecord when any block was handed out, then the security
records (SCRAM credentials, ACLs, client quotas: ``SecurityImage.records``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spool.cluster.image import MetadataImage
from spool.protocol._generated.config_record import ConfigRecord
from spool.protocol._generated.feature_level_record import FeatureLevelRecord
from spool.protocol._generated.producer_ids_record import ProducerIdsRecord
from spool.protocol._generated.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from spool.protocol._generated.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from spool.protocol._generated.topic_record import TopicRecord


def snapshot_records(image: MetadataImage) -> Iterator[Any]:
    """Every record needed to rebuild ``image`` from nothing (module doc)."""
    for name, level in sorted(image.features.items()):
        yield FeatureLevelRecord(name=name, feature_level=level)
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        yield RegisterBrokerRecord(
            broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
            end_points=[BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                       security_protocol=e.security_protocol)
                        for e in b.listeners],
            features=[BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in b.features],
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown)
    for c in sorted(image.controllers.values(), key=lambda c: c.controller_id):
        yield RegisterControllerRecord(
            controller_id=c.controller_id, incarnation_id=c.incarnation_id,
            end_points=[ControllerEndpoint(name=e.name, host=e.host, port=e.port,
                                           security_protocol=e.security_protocol)
                        for e in c.listeners],
            features=[ControllerFeature(name=n, min_supported_version=lo,
                                        max_supported_version=hi)
                      for n, lo, hi in c.features])
    for t in sorted(image.topics_by_id.values(), key=lambda t: t.name):
        yield TopicRecord(name=t.name, topic_id=t.topic_id)
        for pid in sorted(t.partitions):
            yield t.partitions[pid].to_record(t.topic_id, pid)
    for resource in sorted(image.configs):
        for key, value in sorted(image.configs[resource].items()):
            yield ConfigRecord(resource_type=resource.type, resource_name=resource.name,
                               name=key, value=value)
    if image.next_producer_id:
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                next_producer_id=image.next_producer_id)
    yield from image.security.records()
