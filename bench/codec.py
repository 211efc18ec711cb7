"""Codec micro-benchmark: ``python -m bench.codec`` (a measurement, not a test).

* ProduceRequest v9 decode: 1 topic x 6 partitions x 16 KiB records
  (records stay zero-copy memoryview slices).
* FetchResponse v11 encode: 1 topic x 6 partitions x 16 KiB records given as
  bytes, into a chunk list (the records are appended, not copied).
* FetchResponse v11 encode + ``b''.join``: what a to_bytes() caller pays.

Prints operations per second (best of several rounds) as a small table.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from spool.protocol._generated.fetch_response import FetchResponse
from spool.protocol._generated.produce_request import ProduceRequest

PARTITIONS = 6
RECORDS = 16 * 1024


def produce_request_v9() -> bytes:
    parts = [ProduceRequest.PartitionProduceData(index=i, records=bytes([i]) * RECORDS)
             for i in range(PARTITIONS)]
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000,
                         topic_data=[ProduceRequest.TopicProduceData(name='bench-topic',
                                                                     partition_data=parts)])
    return req.to_bytes(9)


def fetch_response_v11() -> FetchResponse:
    parts = [FetchResponse.PartitionData(partition_index=i, error_code=0, high_watermark=1000,
                                         last_stable_offset=1000, log_start_offset=0,
                                         aborted_transactions=None, preferred_read_replica=-1,
                                         records=bytes([i]) * RECORDS)
             for i in range(PARTITIONS)]
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0,
                         responses=[FetchResponse.FetchableTopicResponse(topic='bench-topic',
                                                                         partitions=parts)])


def rate(fn: Callable[[], object], seconds: float, rounds: int) -> float:
    """Best operations/s over ``rounds`` timed runs of about ``seconds`` each."""
    n = 1
    while True:  # calibrate the loop count
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds / 4:
            break
        n *= 2
    loops = max(1, int(n * seconds / elapsed))
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best = max(best, loops / (time.perf_counter() - start))
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog='python -m bench.codec', description=__doc__)
    parser.add_argument('--seconds', type=float, default=0.5, help='per timed round')
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args(argv)

    produce = memoryview(produce_request_v9())
    fetch = fetch_response_v11()

    def decode_produce() -> None:
        ProduceRequest.decode(produce, 0, 9)

    def encode_fetch() -> None:
        fetch.encode(11, [])

    def encode_fetch_joined() -> None:
        fetch.to_bytes(11)

    cases = [
        ('ProduceRequest v9 decode', f'{len(produce):,} B', decode_produce),
        ('FetchResponse v11 encode (chunks)', f'{len(fetch.to_bytes(11)):,} B', encode_fetch),
        ('FetchResponse v11 encode + join', f'{len(fetch.to_bytes(11)):,} B', encode_fetch_joined),
    ]
    print(f'{"case":<36} {"size":>10} {"ops/s":>12} {"us/op":>9}')
    for name, size, fn in cases:
        ops = rate(fn, args.seconds, args.rounds)
        print(f'{name:<36} {size:>10} {ops:>12,.0f} {1e6 / ops:>9.2f}')


if __name__ == '__main__':
    main()
