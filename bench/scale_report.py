"""``bench.scale`` results as the scale section of docs/BENCHMARKS.md and docs/bench-scale.png.

The section lives between ``<!-- scale:begin -->`` and ``<!-- scale:end -->``
(``bench.report.write_section``); a part missing from the results is left out. The chart:
produce records/s and p99 latency against partitions, start-up seconds, Metadata
latency, produce records/s against connections; Spool beside Tansu where Tansu ran.
"""

from __future__ import annotations

from pathlib import Path

from bench.report import write_section

BEGIN, END = "<!-- scale:begin -->", "<!-- scale:end -->"
BROKERS = ("spool", "tansu")


def _when(part: dict) -> str:
    return (f"Run {part.get('when', '?')}, 1-min load average {part.get('load_average', 0):.1f} "
            "at its end.")


def _med(r: dict, key: str, fmt: str) -> str:
    return f"{r[key]['median']:{fmt}}" if key in r else "-"


def _m(s: dict, fmt: str = ",.0f") -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}-{s['max']:{fmt}})"


def _partitions(p: dict, runs: int) -> list[str]:
    runs = p.get("runs", runs)
    out = [
        "### Produce across partitions",
        "",
        f"One confluent-kafka producer, {p['records']:,} x {p['size']} B, acks=1, linger.ms=5, "
        "dealt over the partitions in turn, 10,000 / n records at a time (each request "
        "carries many partitions, small batches at 1,000: the per-partition cost); then "
        f"{p['rate']:,} records/s x {p['size']} B for {p['latency_seconds']:g} s, "
        "linger.ms=0, record i to partition i % n: ms from produce() to the "
        f"delivery report. Median (min-max) of {runs} runs; CPU: the broker's seconds for the "
        "throughput run, and its microseconds per record in the fixed-rate run. " + _when(p),
        "",
        "First write: 1 record to each partition of the new topic, before the timed run "
        "(seconds, broker CPU seconds); in Spool a partition's first append writes its "
        "leader-epoch checkpoint (fsync of the file and of the directory).",
        "",
        "| partitions | broker | records/s | CPU s | p50 ms | p99 ms | CPU us/record at the rate "
        "| first write s | its CPU s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in p["by_partitions"].items():
        for b in BROKERS:
            if b in row:
                r = row[b]
                out.append(f"| {int(n):,} | {b} | {_m(r['produce'])} | "
                           f"{r['produce_cpu']['median']:.2f} | {r['p50']['median']:.1f} | "
                           f"{_m(r['p99'], '.1f')} | "
                           f"{_med(r, 'latency_cpu_us', '.0f')} | {_med(r, 'first_s', '.2f')} | "
                           f"{_med(r, 'first_cpu', '.2f')} |")
    return out + [""]


def _startup(s: dict, runs: int) -> list[str]:
    first = next(iter(s.values()))
    runs = first.get("runs", runs)
    out = [
        "### Start-up",
        "",
        "Spool only (Tansu keeps its data in memory). Topics of 100 partitions, every "
        "partition written to (10 x 100 B, about one batch, then one more batch before each "
        "kill -9). Seconds from spawning the process to: its port accepting a connection; a "
        "Metadata request for the bench's topics answering every partition with a leader; "
        "the first acknowledged Produce (acks=1). Polled every 20 ms. Median (min-max) of "
        f"{runs} starts after SIGTERM and {runs} after kill -9; the broker's CPU seconds "
        "when all three were there. " + _when(first),
        "",
        "| partitions | stop | listening s | Metadata s | first produce s | CPU s |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for n, r in s.items():
        for kind, label in (("clean", "SIGTERM"), ("kill9", "kill -9")):
            starts = r[kind]
            if not starts:
                continue
            cols = [_stats_of([x[k] for x in starts]) for k in
                    ("listening", "metadata", "produce", "cpu_at_ready")]
            out.append(f"| {int(n):,} | {label} | " + " | ".join(_m(c, '.2f') for c in cols)
                       + " |")
    out += ["", "Setting up: " + "; ".join(
        f"{int(n):,} partitions ({r['topics']} topics) created in {r['create_s']:.1f} s, "
        f"written in {r['fill_s']:.1f} s, a clean stop took "
        f"{_m(_stats_of(r['stop_s']), '.2f')} s" for n, r in s.items()) + ".", ""]
    return out


def _stats_of(values: list[float]) -> dict:
    import statistics

    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _metadata(md: dict, runs: int) -> list[str]:
    runs = md.get("runs", runs)
    out = [
        "### Metadata with many topics",
        "",
        f"{md['topics']:,} topics of 1 partition (created 500 a CreateTopics request). "
        "A Metadata request v12 for all topics (20 in a row) and for one topic (500 in a row) "
        "on one connection, ms from sending to the response's last byte; p50 and p99, "
        f"median (min-max) of {runs} rounds. " + _when(md),
        "",
        "| broker | create s | create CPU s | all: bytes | all: p50 ms | all: p99 ms "
        "| one: p50 ms | one: p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in BROKERS:
        if b in md:
            r = md[b]
            out.append(f"| {b} | {r['create_s']:.1f} | {r['create_cpu']:.1f} | "
                       f"{r['all']['bytes']:,} | {_m(r['all']['p50'], '.1f')} | "
                       f"{_m(r['all']['p99'], '.1f')} | {_m(r['one']['p50'], '.2f')} | "
                       f"{_m(r['one']['p99'], '.2f')} |")
    return out + [""]


def _connections(c: dict, runs: int) -> list[str]:
    runs = c.get("runs", runs)
    out = [
        "### Produce across connections",
        "",
        f"N raw-socket producers in one asyncio process (`bench.scale_conns`): each sends one "
        f"pre-encoded Produce v9 (acks=1, a batch of {c['batch_records']} x 1 KiB) again and "
        f"again, {c['depth']} in flight, to partition i % {c['partitions']}; records "
        f"acknowledged in {c['seconds']:g} s after a warm-up. Median (min-max) of {runs} runs; "
        "the broker's CPU microseconds per record and the client's CPU seconds over the window "
        "(the client is not the cap while it stays well under the window). " + _when(c),
        "",
        "| connections | broker | records/s | broker CPU us/record | client CPU s |",
        "|---:|---|---:|---:|---:|",
    ]
    for n, row in c["by_connections"].items():
        for b in BROKERS:
            if b in row:
                r = row[b]
                out.append(f"| {int(n):,} | {b} | {_m(r['records_per_s'])} | "
                           f"{r['broker_cpu_us_per_record']['median']:.1f} | "
                           f"{r['client_cpu']['median']:.2f} |")
    return out + [""]


# Written from py-spy profiles of the broker (``py-spy record --nonblocking -r 200``) taken
# on 2026-11-27 around 17:10 UTC, main at efab0ab6, before issue 22's fixes to these paths.
NOTES = [
    "### What bounds these figures (py-spy of the broker, 2026-11-27, before issue 22's "
    "fixes)",
    "",
    "- Produce into a new 1,000-partition topic, the first record of each partition: 55% of "
    "the broker's samples in `LeaderEpochCache._set` -> `atomic_write` (fsync of the file, "
    "then of the directory) on the event loop: a partition's first append writes its "
    "leader-epoch checkpoint, about 1 ms a partition and a stall for every connection "
    "(the first-write column: ~1 s for 1,000 partitions, Tansu 0.1 s). After it the "
    "steady per-partition cost is small: 0.25 CPU s for 200k x 1 KiB at 1 partition, 0.31 at "
    "1,000 (decode, validate, `check_record_count`, append, per partition and request).",
    "- Produce over 100 connections against 1: per request the same decode "
    "(`_d_ProduceRequest_v9`, the topic name's UTF-8 each time), dispatch and one "
    "`sock_sendall` a response; with 1 connection 5 pipelined requests arrive in one read "
    "and the event loop's own poll is 29% of the samples, with 100 connections 5%. "
    "Measured again at 17:50 UTC on main (1-min load 10.4): broker CPU 5.1 / 8.8 / 9.0 us a "
    "record at 1 / 100 / 1,000 connections (Tansu 7.4 / 14.7 / 12.8), the same as the "
    "table's; the rates, 88k / 58k / 71k (Tansu 90k / 62k / 69k), only show the load "
    "(`connections_rerun` in docs/bench-scale.json).",
    "- Metadata, all of 9,400 topics, before 6d24da1c (17:00 UTC, load 6.7): p50 472 ms, "
    "p99 1,147 ms, 64% in `MetadataStore.topic`, a `copy.deepcopy` of each topic for every "
    "request, 72% in `_topic_entry` in all, the encode 3%. 6d24da1c builds a topic's entry "
    "once per change of the topic: the table's figures (p50 48 ms) are after it.",
    "- Start-up with 9,400 one-partition topics, before 78a8b4e5: `_open_log` 30% "
    "(producer state, txn index paths, `mkdir`), `LogConfig.from_stored` per topic 17% "
    "(through the deep-copying `MetadataStore.topics`). After SIGTERM with 9,400 "
    "partitions in 94 topics on main at 17:54 UTC (py-spy --threads, load 10): 77% of "
    "the samples in `LogManager._open_log` on the two executor threads, which share one "
    "GIL: the directory listing of each partition (`_remove_leftovers`, 17%), producer "
    "state (tail scan and snapshot, 12%), the txn index read and truncated "
    "(`txn_index.truncate_from`, 12%, after a clean stop too), the leader-epoch file (7%), "
    "the offset index (6%); interpreter and imports about 0.6 s (the listening column).",
    "- Clean stop with 9,400 partitions: `PartitionLog.close` 69%: index write-out 38%, "
    "segment flush (fsync) 37%, the checkpoint files and a directory fsync each; so a "
    "SIGTERM costs seconds and the next start is no faster than after kill -9.",
    "",
]


def tables(r: dict) -> str:
    runs = r["runs"]
    out = ["## Scale curves (`python -m bench.scale`)", "",
           "2 cores shared with other work (each part says when it ran and the 1-min load "
           "average then). Tansu 0.6 in memory, Spool on disk. This "
           f"machine's descriptor limit (ulimit -Hn) caps a Spool broker at "
           f"{r['spool_partition_cap']:,} user partitions (2 descriptors each), so the "
           "\"10,000\" points are measured at the largest multiple of 100 under it.", ""]
    if "partitions" in r:
        out += _partitions(r["partitions"], runs)
    if "startup" in r:
        out += _startup(r["startup"], runs)
    if "metadata" in r:
        out += _metadata(r["metadata"], runs)
    if "connections" in r:
        out += _connections(r["connections"], runs)
    out += NOTES
    out += ["![Scale curves](bench-scale.png)", ""]
    return "\n".join(out)


def chart(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(22, 4.2))
    if "partitions" in r:
        rows = r["partitions"]["by_partitions"]
        xs = [int(n) for n in rows]
        for b in BROKERS:
            if all(b in rows[n] for n in rows):
                axes[0].plot(xs, [rows[n][b]["produce"]["median"] for n in rows], "o-", label=b)
                axes[1].plot(xs, [rows[n][b]["p99"]["median"] for n in rows], "o-", label=b)
        for ax, title in ((axes[0], "produce records/s (1 KiB)"),
                          (axes[1], f"produce p99 ms at {r['partitions']['rate']:,}/s")):
            ax.set_xscale("log")
            ax.set_xlabel("partitions")
            ax.set_title(title)
            ax.legend()
        axes[1].set_yscale("log")
    if "startup" in r:
        labels, vals = [], {"metadata": [], "produce": []}
        for n, s in r["startup"].items():
            for kind, label in (("clean", "SIGTERM"), ("kill9", "kill -9")):
                if s[kind]:
                    labels.append(f"{int(n):,}\n{label}")
                    for k in vals:
                        vals[k].append(_stats_of([x[k] for x in s[kind]])["median"])
        xs = range(len(labels))
        for i, k in enumerate(vals):
            axes[2].bar([x + (i - 0.5) * 0.38 for x in xs], vals[k], 0.38, label=k)
        axes[2].set_xticks(list(xs), labels, fontsize=8)
        axes[2].set_title("Spool start-up s (partitions, stop)")
        axes[2].legend()
    if "metadata" in r:
        md = r["metadata"]
        names = [b for b in BROKERS if b in md]
        for i, key in enumerate(("all", "one")):
            axes[3].bar([x + (i - 0.5) * 0.38 for x in range(len(names))],
                        [md[b][key]["p99"]["median"] for b in names], 0.38,
                        label=f"{key} topics p99" if key == "all" else "one topic p99")
        axes[3].set_xticks(range(len(names)), names)
        axes[3].set_yscale("log")
        axes[3].set_title(f"Metadata ms, {md['topics']:,} topics")
        axes[3].legend()
    if "connections" in r:
        rows = r["connections"]["by_connections"]
        xs = [int(n) for n in rows]
        for b in BROKERS:
            if all(b in rows[n] for n in rows):
                axes[4].plot(xs, [rows[n][b]["records_per_s"]["median"] for n in rows], "o-",
                             label=b)
        axes[4].set_xscale("log")
        axes[4].set_xlabel("producer connections")
        axes[4].set_title("produce records/s (1 KiB)")
        axes[4].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def write(r: dict, docs: Path) -> None:
    chart(r, docs / "bench-scale.png")
    write_section(docs / "BENCHMARKS.md", BEGIN, END, tables(r) + "\n")
