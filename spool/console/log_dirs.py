"""Partition sizes from DescribeLogDirs (confluent-kafka has no call for it).

``LogDirs.of(client_config, timeout)`` is None unless the client speaks PLAINTEXT
(Spool's own client would need the security settings translated: not done; the pages
then show no sizes). ``sizes(topic, leaders, nodes)`` asks each leader, over
``spool.net.client.NodeClient`` (DescribeLogDirs v1, the topic's partitions it
leads), and answers partition -> bytes of the leader's replica (its log dirs summed,
future replicas left out). A broker that does not answer leaves its partitions out:
a size is shown only when a broker said it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from spool.net.client import NodeClient
from spool.protocol._generated import DescribeLogDirsRequest
from spool.protocol._generated.describe_log_dirs_request import DescribableLogDirTopic

log = logging.getLogger("spool.console")


class LogDirs:
    """DescribeLogDirs over fresh connections per call (module doc)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    @classmethod
    def of(cls, client_config: dict[str, Any], timeout: float) -> LogDirs | None:
        protocol = str(client_config.get("security.protocol", "PLAINTEXT")).upper()
        return cls(timeout) if protocol == "PLAINTEXT" else None

    def sizes(self, topic: str, leaders: dict[int, int | None],
              nodes: dict[int, tuple[str, int]]) -> dict[int, int]:
        by_node: dict[int, list[int]] = {}
        for partition, leader in leaders.items():
            if leader is not None and leader in nodes:
                by_node.setdefault(leader, []).append(partition)
        if not by_node:
            return {}
        return asyncio.run(self._ask(topic, by_node, nodes))

    async def _ask(self, topic: str, by_node: dict[int, list[int]],
                   nodes: dict[int, tuple[str, int]]) -> dict[int, int]:
        answers = await asyncio.gather(*(self._one(topic, parts, nodes[node])
                                         for node, parts in by_node.items()))
        out: dict[int, int] = {}
        for answer in answers:
            out.update(answer)
        return out

    async def _one(self, topic: str, partitions: list[int],
                   address: tuple[str, int]) -> dict[int, int]:
        ms = int(self.timeout * 1000)
        client = NodeClient(address[0], address[1], client_id="spool-console",
                            request_timeout_ms=ms, connect_timeout_ms=ms)
        request = DescribeLogDirsRequest(topics=[
            DescribableLogDirTopic(topic=topic, partitions=sorted(partitions))])
        try:
            response = await client.request(request, 1)
        except Exception as e:  # no answer: no sizes from this broker
            log.debug("console: DescribeLogDirs at %s:%d failed: %s", *address, e)
            return {}
        finally:
            await client.close()
        out: dict[int, int] = {}
        for result in response.results:
            if result.error_code:
                continue
            for t in result.topics:
                for p in t.partitions:
                    if t.name == topic and not p.is_future_key:
                        out[p.partition_index] = out.get(p.partition_index, 0) + p.partition_size
        return out

    def close(self) -> None:
        pass
