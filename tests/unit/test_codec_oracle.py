"""kafka-python 3.0.12 as an independent oracle for the generated codec.

For a sample of (message, version) pairs, the same content is built with
kafka-python's own message classes (its codec is a separate implementation
of the same specs); our encoding must be byte-identical to theirs, and our
decoding of their bytes must give back the same content. Content comes from
hand-written examples, from the Hypothesis strategies of the round-trip test
for the APIs the broker serves, and from a light sweep over every message
and version.

The converter between the two object models walks OUR spec (field presence
per version); values map one to one except kafka-python's ``bitfield`` for
Metadata's authorized operations (a set of bit numbers, ``None`` for
INT32_MIN) and its tagged-field bookkeeping (it writes a tagged field when
given explicitly, so defaults are left out).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import kafka
import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl
import pytest
from hypothesis import HealthCheck, given, settings
from kafka.protocol.api_message import ApiMessage

from spool.protocol._generated import MESSAGES
from spool.protocol.primitives import ZERO_UUID
from tools.codegen.schema import DEFAULT_STRUCT, FieldSpec, MessageSpec, StructSpec, specs_by_name
from tools.codegen.strategies import message_pairs

SPECS = specs_by_name()

KP: dict[str, type] = {}
for _mod in (kafka.protocol.producer, kafka.protocol.consumer, kafka.protocol.admin,
             kafka.protocol.metadata, kafka.protocol.sasl):
    for _name, _obj in vars(_mod).items():
        if isinstance(_obj, type) and getattr(_obj, '_struct', None) is not None:
            KP.setdefault(_name, _obj)

# kafka-python renames these (its json_patch) and types them as bitfields
_RENAMED = {'cluster_authorized_operations': 'authorized_operations',
            'topic_authorized_operations': 'authorized_operations'}


# ---------------------------------------------------------------- conversion


def _kp_field(kp_cls: type, f: FieldSpec) -> tuple[str, Any]:
    name = f.attr if f.attr in kp_cls.fields else _RENAMED[f.attr]
    return name, kp_cls.fields[name]


def _is_bitfield(kp_field: Any) -> bool:
    return getattr(kp_field, '_type_str', None) == 'bitfield'


def _to_bits(value: int) -> set[int] | None:
    value &= 0xFFFFFFFF
    bits = {i for i in range(32) if value >> i & 1}
    return None if bits == {31} else bits


def _from_bits(bits: set[int] | None) -> int:
    value = sum(1 << i for i in ({31} if bits is None else bits))
    return value - (1 << 32) if value >= 1 << 31 else value


def _is_default(f: FieldSpec, value: Any) -> bool:
    if f.default is DEFAULT_STRUCT:
        return value == type(value)()
    if f.elem == 'uuid' and not f.is_array:
        return value == ZERO_UUID
    return value == f.default


def to_kp(struct: StructSpec, obj: Any, kp_cls: type, version: int, top: bool) -> Any:
    kwargs = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.attr)
        if f.is_tagged_at(version) and _is_default(f, value):
            continue
        name, kp_field = _kp_field(kp_cls, f)
        if f.struct is not None and value is not None:
            child = kp_field.data_class
            if f.is_array:
                value = [to_kp(f.struct, e, child, version, False) for e in value]
            else:
                value = to_kp(f.struct, value, child, version, False)
        elif _is_bitfield(kp_field):
            value = _to_bits(value)
        elif f.elem == 'records' and value is not None:
            value = bytes(value)
        kwargs[name] = value
    if not top:
        return kp_cls(**kwargs)
    if _is_data(kp_cls):
        return kp_cls(version=version, **kwargs)
    return kp_cls[version](**kwargs)


def _is_data(kp_cls: type) -> bool:
    """kafka-python's non-API structs (ApiData) frame themselves with an int16 version."""
    return not issubclass(kp_cls, ApiMessage)


def _nested_classes(root: type) -> dict[str, type]:
    return {name: getattr(root, name) for name in dir(root)
            if isinstance(getattr(root, name), type) and name[:1].isupper()}


def from_kp_message(spec: MessageSpec, kp_obj: Any, version: int) -> Any:
    root = MESSAGES[spec.name]
    classes = _nested_classes(root)

    def conv(struct: StructSpec, obj: Any) -> Any:
        cls = root if struct is spec.root else classes[struct.name]
        kwargs = {}
        for f in struct.fields:
            if version not in f.versions:
                continue
            name, kp_field = _kp_field(type(obj), f)
            value = getattr(obj, name)
            if value is None and f.default is DEFAULT_STRUCT:
                value = classes[f.struct.name]()  # kafka-python: absent tagged struct
            elif f.struct is not None and value is not None:
                value = ([conv(f.struct, e) for e in value] if f.is_array
                         else conv(f.struct, value))
            elif _is_bitfield(kp_field):
                value = _from_bits(value)
            elif f.elem == 'uuid' and not f.is_array and value is None:
                value = ZERO_UUID
            kwargs[f.attr] = value
        return cls(**kwargs)

    return conv(spec.root, kp_obj)


def assert_matches_oracle(spec: MessageSpec, ours: Any, version: int, expected: Any) -> None:
    """Our bytes == kafka-python's bytes; both decoders agree on them."""
    kp_cls = KP[spec.name]
    ours_bytes = ours.to_bytes(version)
    kp_obj = to_kp(spec.root, ours, kp_cls, version, True)
    no_header = {'header': False} if _is_data(kp_cls) else {}
    theirs = bytes(kp_obj.encode(version=version, **no_header))
    assert ours_bytes == theirs, f'{spec.name} v{version}: {ours_bytes.hex()} != {theirs.hex()}'
    assert type(ours).from_bytes(theirs, version) == expected
    if spec.name == 'ApiVersionsResponse' and ours.error_code != 0:
        return  # kafka-python decodes an error body as v0 whatever the version
    decoded_theirs = kp_cls.decode(theirs, version=version, **no_header)
    assert from_kp_message(spec, decoded_theirs, version) == expected


# ---------------------------------------------------------------- hand-written examples


def _m(name: str) -> type:
    return MESSAGES[name]


def example(name: str, version: int) -> Any:
    """A realistic message; fields absent at ``version`` are simply dropped."""
    cls = _m(name)
    tid = uuid.UUID('12345678-1234-5678-1234-567812345678')
    batch = bytes(range(61)) * 3
    if name == 'ApiVersionsRequest':
        return cls(client_software_name='spool-test', client_software_version='0.1')
    if name == 'ApiVersionsResponse':
        keys = [cls.ApiVersion(api_key=k, min_version=0, max_version=m)
                for k, m in ((0, 11), (1, 12), (3, 12), (18, 4))]
        return cls(error_code=0, api_keys=keys, throttle_time_ms=5,
                   supported_features=[cls.SupportedFeatureKey(name='f', min_version=1,
                                                               max_version=2)],
                   finalized_features_epoch=7)
    if name == 'MetadataRequest':
        return cls(topics=[cls.MetadataRequestTopic(name='orders', topic_id=tid),
                           cls.MetadataRequestTopic(name='événements')],
                   allow_auto_topic_creation=False, include_topic_authorized_operations=True)
    if name == 'MetadataResponse':
        parts = [cls.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=1,
                                               leader_epoch=3, replica_nodes=[1, 2],
                                               isr_nodes=[1], offline_replicas=[2])
                 for i in range(3)]
        return cls(throttle_time_ms=1,
                   brokers=[cls.MetadataResponseBroker(node_id=1, host='localhost', port=9092,
                                                       rack='r1'),
                            cls.MetadataResponseBroker(node_id=2, host='h2', port=9093)],
                   cluster_id='spool-cluster', controller_id=1,
                   topics=[cls.MetadataResponseTopic(error_code=0, name='orders', topic_id=tid,
                                                     is_internal=False, partitions=parts,
                                                     topic_authorized_operations=0x0F8)],
                   cluster_authorized_operations=-2147483648)
    if name == 'ProduceRequest':
        td = cls.TopicProduceData
        return cls(transactional_id='txn-1', acks=-1, timeout_ms=30000,
                   topic_data=[td(name='orders', topic_id=tid, partition_data=[
                       cls.PartitionProduceData(index=i, records=batch) for i in range(2)])])
    if name == 'FetchRequest':
        return cls(cluster_id=None, replica_id=-1, max_wait_ms=500, min_bytes=1,
                   max_bytes=52428800, isolation_level=1, session_id=0, session_epoch=-1,
                   topics=[cls.FetchTopic(topic='orders', topic_id=tid, partitions=[
                       cls.FetchPartition(partition=i, current_leader_epoch=3, fetch_offset=100,
                                          last_fetched_epoch=2, log_start_offset=-1,
                                          partition_max_bytes=1048576) for i in range(3)])],
                   forgotten_topics_data=[cls.ForgottenTopic(topic='old', partitions=[1, 2])],
                   rack_id='rack-a')
    if name == 'FetchResponse':
        parts = [cls.PartitionData(partition_index=i, error_code=0, high_watermark=200,
                                   last_stable_offset=150, log_start_offset=0,
                                   aborted_transactions=[cls.AbortedTransaction(
                                       producer_id=9, first_offset=120)] if i == 0 else None,
                                   preferred_read_replica=-1, records=batch)
                 for i in range(3)]
        return cls(throttle_time_ms=0, error_code=0, session_id=77,
                   responses=[cls.FetchableTopicResponse(topic='orders', topic_id=tid,
                                                         partitions=parts)])
    if name == 'ListOffsetsRequest':
        return cls(replica_id=-1, isolation_level=1, topics=[cls.ListOffsetsTopic(
            name='orders', partitions=[cls.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=3, timestamp=-1)])])
    if name == 'ListOffsetsResponse':
        return cls(throttle_time_ms=0, topics=[cls.ListOffsetsTopicResponse(
            name='orders', partitions=[cls.ListOffsetsPartitionResponse(
                partition_index=0, error_code=0, timestamp=-1, offset=42, leader_epoch=3)])])
    if name == 'JoinGroupRequest':
        return cls(group_id='g', session_timeout_ms=10000, rebalance_timeout_ms=30000,
                   member_id='', group_instance_id=None, protocol_type='consumer',
                   protocols=[cls.JoinGroupRequestProtocol(name='range', metadata=b'\x00\x01m')],
                   reason='join')
    if name == 'JoinGroupResponse':
        return cls(throttle_time_ms=0, error_code=0, generation_id=3, protocol_type='consumer',
                   protocol_name='range', leader='m-1', skip_assignment=False, member_id='m-1',
                   members=[cls.JoinGroupResponseMember(member_id='m-1', group_instance_id=None,
                                                        metadata=b'meta')])
    if name == 'SyncGroupRequest':
        return cls(group_id='g', generation_id=3, member_id='m-1', group_instance_id=None,
                   protocol_type='consumer', protocol_name='range',
                   assignments=[cls.SyncGroupRequestAssignment(member_id='m-1',
                                                               assignment=b'\x00\x01a')])
    if name == 'SyncGroupResponse':
        return cls(throttle_time_ms=0, error_code=0, protocol_type='consumer',
                   protocol_name='range', assignment=b'\x00\x01a')
    if name == 'OffsetCommitRequest':
        return cls(group_id='g', generation_id_or_member_epoch=3, member_id='m-1',
                   group_instance_id=None, retention_time_ms=-1,
                   topics=[cls.OffsetCommitRequestTopic(name='orders', topic_id=tid, partitions=[
                       cls.OffsetCommitRequestPartition(partition_index=0, committed_offset=42,
                                                        committed_leader_epoch=3,
                                                        committed_metadata='')])])
    if name == 'CreateTopicsRequest':
        return cls(topics=[cls.CreatableTopic(
            name='orders', num_partitions=3, replication_factor=1, assignments=[],
            configs=[cls.CreatableTopicConfig(name='cleanup.policy', value='compact'),
                     cls.CreatableTopicConfig(name='x', value=None)])],
            timeout_ms=30000, validate_only=False)
    if name == 'CreateTopicsResponse':
        return cls(throttle_time_ms=0, topics=[cls.CreatableTopicResult(
            name='orders', topic_id=tid, error_code=0, error_message=None,
            topic_config_error_code=5, num_partitions=3, replication_factor=1,
            configs=[cls.CreatableTopicConfigs(name='cleanup.policy', value='compact',
                                               read_only=False, config_source=1,
                                               is_sensitive=False)])])
    raise KeyError(name)


EXAMPLES = [
    ('ApiVersionsRequest', (0, 3)), ('ApiVersionsResponse', (0, 3)),
    ('MetadataRequest', (1, 9, 12)), ('MetadataResponse', (1, 9, 12)),
    ('ProduceRequest', (0, 2, 3, 9, 13)),
    ('FetchRequest', (4, 11, 12)), ('FetchResponse', (4, 11, 12)),
    ('ListOffsetsRequest', (1, 5, 7)), ('ListOffsetsResponse', (1, 5, 7)),
    ('JoinGroupRequest', (0, 5, 7)), ('JoinGroupResponse', (0, 5, 7)),
    ('SyncGroupRequest', (0, 3, 5)), ('SyncGroupResponse', (0, 3, 5)),
    ('OffsetCommitRequest', (2, 7, 8)),
    ('CreateTopicsRequest', (2, 5, 7)), ('CreateTopicsResponse', (2, 5, 7)),
]
EXAMPLE_CASES = [(name, v) for name, versions in EXAMPLES for v in versions]


def _expected_at(spec: MessageSpec, obj: Any, version: int) -> Any:
    """``obj`` with every field absent at ``version`` reset to its default."""
    root = type(obj)
    classes = _nested_classes(root)

    def conv(struct: StructSpec, o: Any) -> Any:
        cls = root if struct is spec.root else classes[struct.name]
        kwargs = {}
        for f in struct.fields:
            if version not in f.versions:
                continue
            value = getattr(o, f.attr)
            if f.struct is not None and value is not None:
                value = ([conv(f.struct, e) for e in value] if f.is_array
                         else conv(f.struct, value))
            kwargs[f.attr] = value
        return cls(**kwargs)

    return conv(spec.root, obj)


@pytest.mark.parametrize(('name', 'version'), EXAMPLE_CASES,
                         ids=[f'{n}-v{v}' for n, v in EXAMPLE_CASES])
def test_example_matches_kafka_python(name: str, version: int) -> None:
    spec = SPECS[name]
    ours = example(name, version)
    expected = _expected_at(spec, ours, version)
    assert_matches_oracle(spec, ours, version, expected)


# ---------------------------------------------------------------- random content

RANDOM = [
    ('ApiVersionsRequest', (0, 3)), ('ApiVersionsResponse', (0, 3)),
    ('MetadataRequest', (1, 9, 12)), ('MetadataResponse', (1, 9, 12)),
    ('ProduceRequest', (0, 3, 9)), ('ProduceResponse', (0, 1, 2, 9, 10)),
    ('FetchRequest', (4, 11, 12)), ('FetchResponse', (4, 11, 12)),
    ('ListOffsetsRequest', (1, 7)), ('ListOffsetsResponse', (1, 7)),
    ('JoinGroupRequest', (0, 6)), ('JoinGroupResponse', (0, 7)),
    ('SyncGroupRequest', (0, 5)), ('SyncGroupResponse', (0, 5)),
    ('OffsetCommitRequest', (2, 8)), ('OffsetCommitResponse', (2, 8)),
    ('OffsetFetchRequest', (1, 7)), ('OffsetFetchResponse', (1, 7)),
    ('CreateTopicsRequest', (2, 5, 7)), ('CreateTopicsResponse', (2, 5, 7)),
    ('FindCoordinatorRequest', (0, 4)), ('FindCoordinatorResponse', (0, 4)),
    ('InitProducerIdRequest', (0, 4)), ('DescribeConfigsResponse', (1, 4)),
    ('ConsumerProtocolAssignment', (0, 3)), ('ConsumerProtocolSubscription', (0, 3)),
]
RANDOM_CASES = [(name, v) for name, versions in RANDOM for v in versions]


@pytest.mark.parametrize(('name', 'version'), RANDOM_CASES,
                         ids=[f'{n}-v{v}' for n, v in RANDOM_CASES])
def test_random_content_matches_kafka_python(name: str, version: int) -> None:
    _check_random(SPECS[name], version, 10)


SWEEP = sorted(name for name in SPECS if name in KP)


def _check_random(spec: MessageSpec, version: int, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(pair=message_pairs(spec, version))
    def check(pair: tuple[Any, Any]) -> None:
        ours, expected = pair
        assert_matches_oracle(spec, ours, version, expected)

    check()


@pytest.mark.parametrize('name', SWEEP)
def test_every_message_and_version_matches_kafka_python(name: str) -> None:
    """A light sweep: a few random messages at every valid version."""
    spec = SPECS[name]
    for version in spec.valid.range():
        _check_random(spec, version, 3)


def test_sweep_covers_every_spec() -> None:
    """Every message kafka-python has a spec for; the rest have no kafka-python class to
    compare with (tests/unit/test_kio_crosscheck.py holds every API to kio, and
    tests/unit/test_metadata_records.py the metadata records to bytes written out by hand)."""
    resources = Path(kafka.__file__).parent / 'protocol' / 'schemas' / 'resources'
    kp_specs = {p.stem for p in resources.glob('*.json')} - {'RequestHeader', 'ResponseHeader'}
    assert set(SWEEP) == kp_specs
