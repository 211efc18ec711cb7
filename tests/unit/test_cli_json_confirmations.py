"""``--json`` on the commands that need no broker and print only what they made."""

from __future__ import annotations

import base64
import json
from importlib.metadata import version

from tests.helpers.cli import spool_cli


def test_version_json():
    res = spool_cli("version", "--json")
    assert (res.returncode, json.loads(res.stdout)) == (0, {"version": version("spool")})


def test_storage_random_uuid_json():
    res = spool_cli("storage", "random-uuid", "--json")
    assert res.returncode == 0
    doc = json.loads(res.stdout)
    assert list(doc) == ["uuid"]
    # a Kafka Uuid: 16 bytes in URL-safe base64 without padding, as kafka-storage prints it
    assert len(base64.urlsafe_b64decode(doc["uuid"] + "==")) == 16
    assert res.stdout == json.dumps(doc) + "\n"  # one line
