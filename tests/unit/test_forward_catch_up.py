"""forward_and_catch_up: a forwarded security write is answered once the broker's own
metadata has reached the controller's high watermark; a write no controller answered is
REQUEST_TIMED_OUT at once, without waiting a second time for the catch-up."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spool.broker.controller_channel import ControllerUnavailable
from spool.broker.forwarding import forward_and_catch_up
from spool.protocol._generated import CreateAclsRequest, CreateAclsResponse
from spool.protocol._generated import describe_quorum_response as dq
from spool.protocol._generated.create_acls_request import AclCreation
from spool.protocol._generated.create_acls_response import AclCreationResult
from spool.protocol.errors import Errors

REQ = CreateAclsRequest(creations=[AclCreation(
    resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
    operation=3, permission_type=3)])
OK = CreateAclsResponse(throttle_time_ms=0, results=[AclCreationResult(error_code=0,
                                                                       error_message=None)])


class Channel:
    def __init__(self, unavailable: bool = False, hw: int = 42) -> None:
        self.unavailable, self.hw, self.sent = unavailable, hw, []

    async def send_until(self, api_key, version, req, timeout):
        self.sent.append(api_key)
        if self.unavailable:
            raise ControllerUnavailable("no controller answered")
        if api_key == 55:
            return dq.DescribeQuorumResponse(error_code=0, topics=[dq.TopicData(
                topic_name="__cluster_metadata", partitions=[dq.PartitionData(
                    partition_index=0, error_code=0, high_watermark=self.hw)])])
        return OK


class Publisher:
    def __init__(self) -> None:
        self.applied = asyncio.Event()
        self.waited_for: list[int] = []

    async def wait_applied(self, offset: int) -> None:
        self.waited_for.append(offset)
        await self.applied.wait()


def ctx_for(channel: Channel, publisher: Publisher):
    broker = SimpleNamespace(controller_channel=channel, request_timeout_s=5.0,
                             role=SimpleNamespace(publisher=publisher))
    return SimpleNamespace(broker=broker, header=SimpleNamespace(api_key=30), api_version=3)


def test_answered_once_the_broker_applied_the_controllers_high_watermark():
    async def main():
        channel, publisher = Channel(hw=42), Publisher()
        task = asyncio.ensure_future(forward_and_catch_up(ctx_for(channel, publisher), REQ))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not task.done() and publisher.waited_for == [41]  # the last committed offset
        assert channel.sent == [30, 55]
        publisher.applied.set()
        assert await task is OK
    asyncio.run(main())


def test_no_controller_is_request_timed_out_without_a_catch_up():
    async def main():
        channel, publisher = Channel(unavailable=True), Publisher()
        resp = await forward_and_catch_up(ctx_for(channel, publisher), REQ)
        assert [(r.error_code, r.error_message) for r in resp.results] == [
            (Errors.REQUEST_TIMED_OUT, "no controller answered")]
        assert channel.sent == [30] and publisher.waited_for == []
    asyncio.run(main())
