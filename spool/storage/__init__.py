"""The storage engine: partition logs on disk, recovery, retention, log manager, metadata log.

Knows nothing of sockets or request messages. See docs/STORAGE.md for the
on-disk layout and the durability contract; each module's docstring draws
its file format and states lifecycle, concurrency and durability.
"""

from spool.storage.config import ConfigSource, ConfigValue, LogConfig, describe_topic_configs
from spool.storage.log import AppendInfo, FetchSlice, PartitionLog

__all__ = [
    "AppendInfo",
    "ConfigSource",
    "ConfigValue",
    "FetchSlice",
    "LogConfig",
    "PartitionLog",
    "describe_topic_configs",
]
