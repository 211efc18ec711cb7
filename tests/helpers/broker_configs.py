"""Config requests over a raw connection (confluent-kafka cannot name the cluster-wide
default, the empty name): IncrementalAlterConfigs v1, AlterConfigs v2, DescribeConfigs v4
with synonyms; BROKER resources unless ``rtype`` says another (GROUP, 32)."""

from __future__ import annotations

from spool.protocol._generated import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from spool.protocol._generated import alter_configs_request as ac
from spool.protocol._generated import incremental_alter_configs_request as iac
from spool.protocol._generated.describe_configs_request import DescribeConfigsResource
from tests.helpers.raw_client import RawClient

BROKER = 4


def raw_incremental(bootstrap: str, name: str, *ops: tuple[str, str | None, int],
                    rtype: int = BROKER) -> tuple[int, str | None]:
    c = RawClient(bootstrap)
    try:
        resp = c.request(44, 1, IncrementalAlterConfigsRequest(validate_only=False, resources=[
            iac.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
                iac.AlterableConfig(name=k, config_operation=op, value=v)
                for k, v, op in ops])]))
    finally:
        c.close()
    return resp.responses[0].error_code, resp.responses[0].error_message


def raw_alter(bootstrap: str, name: str, configs: dict[str, str], rtype: int = BROKER
              ) -> tuple[int, str | None]:
    c = RawClient(bootstrap)
    try:
        resp = c.request(33, 2, AlterConfigsRequest(validate_only=False, resources=[
            ac.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
                ac.AlterableConfig(name=k, value=v) for k, v in configs.items()])]))
    finally:
        c.close()
    return resp.responses[0].error_code, resp.responses[0].error_message


def raw_describe(bootstrap: str, name: str, rtype: int = BROKER) -> dict:
    """{key: (value, source, read_only, sensitive, [(synonym, value, source)])}"""
    c = RawClient(bootstrap)
    try:
        resp = c.request(32, 4, DescribeConfigsRequest(include_synonyms=True,
                                                       include_documentation=False,
                                                       resources=[DescribeConfigsResource(
                                                           resource_type=rtype,
                                                           resource_name=name,
                                                           configuration_keys=None)]))
    finally:
        c.close()
    [r] = resp.results
    assert r.error_code == 0, r.error_message
    return {e.name: (e.value, e.config_source, e.read_only, e.is_sensitive,
                     [(s.name, s.value, s.source) for s in e.synonyms]) for e in r.configs}
