"""Broker throughput with a real client: produce then consume, records/s and MB/s.

    python -m bench.broker [--records 200000] [--size 100] [--partitions 1] [--runs 3]

Starts a Spool broker (data in a temp dir, ephemeral port), produces
``--records`` records of ``--size`` bytes with confluent-kafka (the
throughput workload of ``bench.workloads``: acks=1, linger.ms=5, batch.size
1 MiB, ``produce_batch`` without per-message callbacks), then consumes them
all back. Beside the produce figure it reports the client's own ceiling: how
fast the same records are merely enqueued into librdkafka with no broker.
``bench.compare`` runs the full side-by-side comparison with a reference broker.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench import workloads
from bench.brokers import spool_broker


def fmt(rates: list[float], size: int) -> str:
    med = statistics.median(rates)
    return (f"{med:>10,.0f} rec/s {med * size / 1e6:>7.1f} MB/s "
            f"(min {min(rates):,.0f}, max {max(rates):,.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    produce: list[float] = []
    consume: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, spool_broker(Path(tmp)) as b:
        for i in range(args.runs):
            topic = f"bench-{i}-{time.time_ns()}"
            workloads.create_topic(b.bootstrap, topic, args.partitions)
            produce.append(args.records / workloads.produce(b.bootstrap, topic, args.records,
                                                            args.size))
            consume.append(args.records / workloads.consume(b.bootstrap, topic, args.partitions,
                                                            args.records))
    ceiling = [args.records / workloads.enqueue_only(args.records, args.size)
               for _ in range(args.runs)]
    print(f"{args.records:,} records of {args.size} B, {args.partitions} partition(s), "
          f"median of {args.runs}")
    print(f"  produce  spool          {fmt(produce, args.size)}")
    print(f"  produce  client enqueue {fmt(ceiling, args.size)}")
    print(f"  produce  spool / client enqueue ceiling = "
          f"{statistics.median(produce) / statistics.median(ceiling):.2f}")
    print(f"  consume  spool          {fmt(consume, args.size)}")


if __name__ == "__main__":
    main()
