"""``partition.metadata``: the topic id a partition folder belongs to (Kafka's file).

A cluster broker writes it into every partition folder it creates, as Kafka's
``PartitionMetadataFile`` does::

    version: 0
    topic_id: <the topic id as Kafka prints a Uuid: URL-safe base64, no padding>

It tells a folder of a deleted topic from one of a new topic with the same name:
a broker down while ``orders`` was deleted and created again must not serve the
old folder's records as the new topic's. Written atomically (temp file, fsync,
rename, directory fsync); the segment loader ignores it. A folder without one
(made by a single node, or before this file existed) has no known topic id.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from spool.util.fileio import atomic_write

FILE_NAME = "partition.metadata"
VERSION = 0


def format_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_topic_id(partition_dir: Path, topic_id: uuid.UUID) -> None:
    data = f"version: {VERSION}\ntopic_id: {format_topic_id(topic_id)}\n".encode()
    atomic_write(partition_dir / FILE_NAME, data)


def read_topic_id(partition_dir: Path) -> uuid.UUID | None:
    """The folder's topic id, or None when it has no (readable) file."""
    try:
        text = (partition_dir / FILE_NAME).read_text()
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        return None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    try:
        return parse_topic_id(fields["topic_id"].strip())
    except (KeyError, ValueError):
        return None
