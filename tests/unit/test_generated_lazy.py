"""The generated protocol package imports a message module only when it is used.

``spool.protocol._generated`` resolves class names through its module ``__getattr__``
and its registries are ``LazyMap``s (spool.protocol.message): a fresh interpreter that
imports the package, or spool.cli.wire (what `spool topics ...` loads), has imported no
message module; one registry lookup imports that entry's modules only; iterating a
registry gives every entry, in the generated order, as the eager dicts did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import spool
from spool.protocol._generated import API_BY_KEY, DATA_SCHEMAS, MESSAGES, METADATA_RECORDS

ROOT = Path(spool.__file__).resolve().parents[1]

_PROBE = """
import json, sys
def loaded():
    return sorted(m.rsplit(".", 1)[1] for m in sys.modules
                  if m.startswith("spool.protocol._generated."))
out = {}
import spool.cli.wire
out["wire"] = loaded()
from spool.protocol._generated import API_BY_KEY, DATA_SCHEMAS
out["contains"] = [17 in API_BY_KEY, 10_000 in API_BY_KEY, len(API_BY_KEY) > 80]
out["entry"] = API_BY_KEY[19].name
out["get_unknown"] = API_BY_KEY.get(10_000, "none")
out["after_lookup"] = loaded()
from spool.protocol._generated import DescribeAclsResponse
out["from_import"] = [DescribeAclsResponse.__name__, loaded()]
print(json.dumps(out))
"""


def test_nothing_loads_until_used():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = json.loads(subprocess.run([sys.executable, "-c", _PROBE], capture_output=True,
                                    text=True, env=env, timeout=60, check=True).stdout)
    before = set(out["wire"])
    assert len(before) <= 6, before  # the few spool.net.client names up front
    assert out["contains"] == [True, False, True]
    assert out["entry"] == "CreateTopics"
    assert out["get_unknown"] == "none"
    assert set(out["after_lookup"]) - before == {"create_topics_request",
                                                 "create_topics_response"}
    assert out["from_import"][0] == "DescribeAclsResponse"
    assert set(out["from_import"][1]) - set(out["after_lookup"]) == {"describe_acls_response"}


def test_registries_are_complete_and_ordered():
    keys = list(API_BY_KEY)
    assert keys == sorted(keys) and len(keys) == len(API_BY_KEY) > 80
    for key, entry in API_BY_KEY.items():
        assert entry.request.API_KEY == entry.response.API_KEY == key
        assert entry.request.__name__ == entry.name + "Request"
    assert all(cls.API_KEY == key for key, cls in METADATA_RECORDS.items())
    assert all(cls.__name__ == name for name, cls in DATA_SCHEMAS.items())
    assert set(MESSAGES) >= set(DATA_SCHEMAS) and len(MESSAGES) == len(list(MESSAGES.values()))
    assert dict(API_BY_KEY) == API_BY_KEY and API_BY_KEY.get(18) is API_BY_KEY[18]
