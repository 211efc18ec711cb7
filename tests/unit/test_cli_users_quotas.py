"""``spool users scram`` and ``spool quotas``: kafka-configs' option syntax and output."""

from __future__ import annotations

import pytest

from spool.cli import quotas, users
from spool.cli.common import CliError


def test_scram_add_config_as_kafka_configs_takes_it() -> None:
    assert users.parse_credentials([
        "SCRAM-SHA-256=[iterations=8192,password=a,b=c]", "SCRAM-SHA-512=[password=x]"]) == {
        "SCRAM-SHA-256": (8192, "a,b=c"), "SCRAM-SHA-512": (4096, "x")}
    assert users.parse_credentials(["SCRAM-SHA-256=[iterations=-1,password=p]"]) == {
        "SCRAM-SHA-256": (4096, "p")}


@pytest.mark.parametrize("spec, message", [
    ("SCRAM-SHA-1=[password=p]", "Unexpected config names: SCRAM-SHA-1"),
    ("SCRAM-SHA-256=[iterations=100,password=p]",
     "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"),
    ("SCRAM-SHA-256=[iterations=9000]", "Invalid credential property SCRAM-SHA-256=iterations=9000"),
])
def test_scram_refusals(spec: str, message: str) -> None:
    with pytest.raises(CliError, match=message) as info:
        users.parse_credentials([spec])
    assert info.value.code == 2


def test_scram_delete_names_mechanisms() -> None:
    assert users.parse_mechanisms(["SCRAM-SHA-256,SCRAM-SHA-512", "SCRAM-SHA-256"]) == [
        "SCRAM-SHA-256", "SCRAM-SHA-512"]
    with pytest.raises(CliError, match="Unexpected config names: producer_byte_rate"):
        users.parse_mechanisms(["producer_byte_rate"])


def test_quota_entities_and_ops() -> None:
    assert quotas.entity("alice", False, None, True) == (("user", "alice"), ("client-id", None))
    assert quotas.entity(None, False, None, False) == ()
    with pytest.raises(CliError, match="--user NAME or --user-defaults, not both"):
        quotas.entity("alice", True, None, False)
    assert quotas.parse_ops(["producer_byte_rate=1048576,request_percentage=[50.5]"],
                            ["consumer_byte_rate"]) == {
        "producer_byte_rate": 1048576.0, "request_percentage": 50.5, "consumer_byte_rate": None}
    with pytest.raises(CliError, match="Unexpected config names: retention.ms"):
        quotas.parse_ops(["retention.ms=1"], None)
    with pytest.raises(CliError, match="Cannot parse quota configuration value for "
                                       "producer_byte_rate: fast"):
        quotas.parse_ops(["producer_byte_rate=fast"], None)


def test_quota_lines_as_kafka_prints_them() -> None:
    assert quotas.describe_line((("user", "alice"), ("client-id", None)), {
        "producer_byte_rate": 10485760.0, "consumer_byte_rate": 2048.0}) == (
        "Quota configs for user-principal 'alice', the default client-id are "
        "consumer_byte_rate=2048.0, producer_byte_rate=1.048576E7")
    assert [quotas.java_double(v) for v in (1e7, 0.5, 1e-4, 123.25, 0.0)] == [
        "1.0E7", "0.5", "1.0E-4", "123.25", "0.0"]
