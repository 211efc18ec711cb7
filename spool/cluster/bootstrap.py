"""The bootstrap metadata ``spool storage format`` leaves for a new cluster's first start.

Kafka's ``kafka-storage format`` writes ``bootstrap.checkpoint`` beside the metadata
log: records (metadata.version, ``--add-scram`` credentials) the first active
controller appends to an empty metadata log. Spool keeps the records other than the
feature levels (those come from ``spool.cluster.features``) in
``<metadata.log.dir>/bootstrap.spool.json``::

    {"version": 0, "records": ["<base64 of one framed metadata record>", ...]}

(each as ``spool.protocol.metadata_records.encode_record`` frames it). A cluster's first
active controller appends them on an empty log (``QuorumController.activate``); a single
node replays them into its metadata store on its first start, when the store is empty.
Later starts ignore the file. Written atomically (temporary file, fsync, rename).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spool.protocol.metadata_records import decode_record, encode_record

BOOTSTRAP_FILE = "bootstrap.spool.json"


def write_bootstrap(metadata_dir: str | os.PathLike, records: Sequence[Any]) -> Path:
    """Write ``records`` as the dir's bootstrap metadata (replacing any)."""
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    body = json.dumps({"version": 0, "records": [
        base64.b64encode(encode_record(r)).decode() for r in records]})
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_bootstrap(metadata_dir: str | os.PathLike) -> list[Any]:
    """The dir's bootstrap records ([] without a file); ValueError for a corrupt one."""
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    try:
        doc = json.loads(text)
        return [decode_record(base64.b64decode(v))[0] for v in doc["records"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not bootstrap metadata: {e}") from e
