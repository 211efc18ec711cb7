"""The storage engine: partition logs on disk, recovery, retention, log manager, metadata log.

Knows nothing of sockets or request messages. See docs/STORAGE.md for the
on-disk layout and the durability contract; each module's docstring draws
its file format and states lifecycle, concurrency and durability.

    Storage (engine)        LogManager + MetadataStore, kept consistent
    LogManager (manager)    every partition across log.dirs; background work
    PartitionLog (log)      one partition: append / read / offsets / retention
    LogSegment (segment)    one .log file + OffsetIndex / TimeIndex (index)
    load_segments (loader)  startup recovery
    LogConfig (config)      Kafka's topic configs, broker synonyms, sources
    MetadataStore (metadata) __cluster_metadata as JSON records
    claim_log_dirs (logdirs) .lock + meta.properties: owning a log dir
"""

from spool.storage.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_TO_BROKER_KEY,
    ConfigSource,
    ConfigValue,
    LogConfig,
    describe_topic_configs,
)
from spool.storage.engine import Storage
from spool.storage.log import AppendInfo, FetchSlice, PartitionLog
from spool.storage.manager import LogManager, validate_topic_name
from spool.storage.metadata import MetadataImage, MetadataStore, TopicImage

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "TOPIC_TO_BROKER_KEY",
    "AppendInfo",
    "ConfigSource",
    "ConfigValue",
    "FetchSlice",
    "LogConfig",
    "LogManager",
    "MetadataImage",
    "MetadataStore",
    "PartitionLog",
    "Storage",
    "TopicImage",
    "describe_topic_configs",
    "validate_topic_name",
]
