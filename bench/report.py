"""Turn ``bench.compare`` results into the tables of docs/BENCHMARKS.md and a PNG chart.

The comparison lives between ``<!-- compare:begin -->`` and
``<!-- compare:end -->`` in BENCHMARKS.md; the rest of the page is left as
it is. The chart (docs/bench-compare.png) shows produce and consume
records/s per workload, Spool beside the reference, with min-max bars and the
client's ceiling (a black line) above each pair. ``verdicts(results)`` judges issue 22's
targets from the same figures.

``write_section(page, begin, end, text)`` is how every bench keeps its own
section of a docs page: ``text`` between its two markers, replaced in place if
they are there, appended otherwise; the rest of the page is untouched.
"""

from __future__ import annotations

from pathlib import Path

BEGIN = "<!-- compare:begin -->"
END = "<!-- compare:end -->"


def _rate(s: dict, size: int) -> str:
    m = s["median"]
    return f"{m:,.0f} ({m * size / 1e6:,.1f} MB/s; {s['min']:,.0f}-{s['max']:,.0f})"


def _med(w: dict, who: str, key: str) -> float:
    return w[who][key]["median"]


def verdicts(r: dict) -> list[dict]:
    """Issue 22's targets on the throughput workloads, each with its figures and met or not:
    1 KiB at 6 and 64 partitions produce >= 1.5x Tansu; Spool's broker CPU seconds for
    produce and for consume <= half of Tansu's on every workload; 100 B produce >= 90% of
    the client's ceiling (the same producer into librdkafka's mock cluster)."""
    out = []
    for name, w in r["throughput"].items():
        if w["size"] == 1024 and w["partitions"] in (6, 64):
            s, t = _med(w, "spool", "produce"), _med(w, "tansu", "produce")
            out.append({"target": "produce >= 1.5x Tansu", "workload": name,
                        "figures": f"Spool {s:,.0f}, Tansu {t:,.0f} rec/s: {s / t:.2f}x",
                        "met": s >= 1.5 * t})
        for op in ("produce", "consume"):
            s, t = _med(w, "spool", op + "_cpu"), _med(w, "tansu", op + "_cpu")
            out.append({"target": f"broker CPU, {op} <= 0.5x Tansu's", "workload": name,
                        "figures": f"Spool {s:.2f} s, Tansu {t:.2f} s: "
                                   + (f"{s / t:.2f}x" if t else "n/a"),
                        "met": s <= 0.5 * t})
        if w["size"] == 100 and "ceiling_produce_mock" in w["client"]:
            s, c = _med(w, "spool", "produce"), _med(w, "client", "ceiling_produce_mock")
            out.append({"target": "100 B produce >= 90% of the client's ceiling",
                        "workload": name,
                        "figures": f"Spool {s:,.0f}, ceiling (mock cluster) {c:,.0f} rec/s: "
                                   f"{s / c:.0%}",
                        "met": s >= 0.9 * c})
    return out


def verdict_text(v: list[dict]) -> str:
    met = sum(x["met"] for x in v)
    lines = [f"Targets: {met} of {len(v)} met"]
    lines += [f"- {'met' if x['met'] else 'NOT met'}: {x['target']}, {x['workload']}: "
              f"{x['figures']}" for x in v]
    return "\n".join(lines)


def tables(r: dict) -> str:
    la = r.get("load_average", {})
    out = [
        "## Spool against a reference broker (`python -m bench.compare`)",
        "",
        "Tansu 0.6 (Rust, `memory://` storage) and Spool (writing to disk), both on",
        "127.0.0.1, driven by the same confluent-kafka 2.16.1 workloads, taking turns",
        f"in each of {r['runs']} runs (median, min-max). Records/s. Produce: one producer",
        "(acks=1, linger.ms=5, batch.size 1 MiB, `produce_batch`). Consume: "
        f"{r.get('consumers', 1)} consumer",
        "processes (at most one per partition; partitions dealt round-robin; the slowest sets",
        "the time). CPU: broker CPU seconds (client CPU seconds in brackets, all its",
        "processes and threads) for the workload.",
    ]
    if la:
        out += ["", f"Load average (1, 5, 15 min) at the start {_la(la['start'])}, at the end "
                    f"{_la(la['end'])}; {r.get('seconds', 0) / 60:.0f} minutes in all."]
    out += [
        "",
        "| workload | | Spool | Tansu | Spool / Tansu | client ceiling | Spool / ceiling "
        "| Spool CPU s | Tansu CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, w in r["throughput"].items():
        s, t, c, size = w["spool"], w["tansu"], w.get("client", {}), w["size"]
        for op in ("produce", "consume"):
            ratio = s[op]["median"] / t[op]["median"]
            ck = "ceiling_produce_mock" if op == "produce" else "ceiling_consume"
            ceil = f"{_rate(c[ck], size)}" if ck in c else "n/a"
            share = f"{s[op]['median'] / c[ck]['median']:.0%}" if ck in c else "n/a"
            cpu = op + "_cpu"
            ccpu = op + "_client_cpu"
            out.append(
                f"| {name} | {op} | {_rate(s[op], size)} | {_rate(t[op], size)} | {ratio:.2f} "
                f"| {ceil} | {share} "
                f"| {s[cpu]['median']:.2f} ({s[ccpu]['median']:.2f}) "
                f"| {t[cpu]['median']:.2f} ({t[ccpu]['median']:.2f}) |"
            )
    out += ["", "Client ceilings, same runs (medians):", "",
            "- produce, *mock cluster*: the same producer and config into librdkafka's own "
            "in-memory mock broker (C, in a process of its own; `bench.mock_cluster`);",
            "- produce, *enqueue-only*: records handed to librdkafka with no broker at all;",
            "- consume: the same consumer processes taking the same bytes (Spool's topic) out "
            "of librdkafka's queue after prefetching all of them (`bench.consumers`).", "",
            "| workload | produce, mock cluster | produce, enqueue-only | mock's CPU s "
            "| consume, prefetched |", "|---|---|---|---|---|"]
    for name, w in r["throughput"].items():
        c, size = w.get("client", {}), w["size"]
        if "ceiling_produce_mock" not in c:
            continue
        out.append(f"| {name} | {_rate(c['ceiling_produce_mock'], size)} "
                   f"| {_rate(c['ceiling_produce_enqueue'], size)} "
                   f"| {c['ceiling_produce_mock_broker_cpu']['median']:.2f} "
                   f"| {_rate(c['ceiling_consume'], size)} |")
    if r.get("verdicts"):
        v = r["verdicts"]
        out += ["", f"Issue 22's targets: {sum(x['met'] for x in v)} of {len(v)} met.", "",
                "| target | workload | figures (medians) | |", "|---|---|---|---|"]
        out += [f"| {x['target']} | {x['workload']} | {x['figures']} "
                f"| {'met' if x['met'] else '**NOT met**'} |" for x in v]
    out += ["", "Latency at 10,000 records/s (100 B, acks=1, linger.ms=0), milliseconds:", "",
            "| | Spool p50 | Spool p99 | Tansu p50 | Tansu p99 |", "|---|---|---|---|---|"]
    for kind, lat in r["latency"].items():
        s, t = lat["spool"], lat["tansu"]
        out.append(f"| {kind} | {s['p50']['median']:.2f} | {s['p99']['median']:.2f} "
                   f"| {t['p50']['median']:.2f} | {t['p99']['median']:.2f} |")
    out += ["", "Brokers over the whole benchmark:", ""]
    for name, b in r["brokers"].items():
        out.append(f"- {name}: {b['cpu_seconds_total']:.1f} CPU seconds, "
                   f"peak RSS {b['peak_rss_mb']:.0f} MB")
    lim = r["limits"]
    fts = lim["file_to_socket"]
    out += ["", "Physical limits, same run:", "",
            f"- sequential write of the same bytes, same disk: "
            f"{lim['sequential_write']['page cache MB/s']:,.0f} MB/s into the page cache, "
            f"{lim['sequential_write']['fsynced MB/s']:,.0f} MB/s including fsync",
            f"- file to loopback socket: sendfile {fts['sendfile']:,.0f} MB/s, read+send "
            f"{fts['read+send']:,.0f} MB/s (limit {fts['limit']:,.0f} MB/s)"]
    for name, w in r["throughput"].items():
        if "raw_fetch" in w["spool"]:
            sp = w["spool"]["raw_fetch"]["median"]
            tp = w["tansu"]["raw_fetch"]["median"]
            out.append(f"- raw fetch ({name}, 64 MiB FetchRequests from a bare socket client): "
                       f"Spool {sp:,.0f} MB/s = {sp / fts['limit']:.0%} of the limit; "
                       f"Tansu {tp:,.0f} MB/s")
    out += ["", "![Spool against Tansu](bench-compare.png)", ""]
    return "\n".join(out)


def _la(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def chart(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(r["throughput"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, op in zip(axes, ("produce", "consume"), strict=True):
        xs = range(len(names))
        for i, broker in enumerate(("spool", "tansu")):
            med = [r["throughput"][n][broker][op]["median"] for n in names]
            lo = [m - r["throughput"][n][broker][op]["min"] for m, n in zip(med, names, strict=True)]
            hi = [r["throughput"][n][broker][op]["max"] - m for m, n in zip(med, names, strict=True)]
            ax.bar([x + (i - 0.5) * 0.38 for x in xs], med, 0.38, yerr=[lo, hi], capsize=3,
                   label=broker.capitalize())
        key = "ceiling_produce_mock" if op == "produce" else "ceiling_consume"
        ceil = [(x, r["throughput"][n]["client"][key]["median"]) for x, n in zip(xs, names,
                strict=True) if key in r["throughput"][n].get("client", {})]
        if ceil:
            ax.scatter([x for x, _ in ceil], [c for _, c in ceil], marker="_", s=900,
                       color="black", label="client ceiling", zorder=3)
        ax.set_xticks(list(xs), [n.split(":")[1].strip() for n in names], rotation=15, fontsize=8)
        ax.set_title(f"{op} (records/s, median of {r['runs']})")
        ax.set_ylim(top=ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
        ax.legend(loc="upper left", fontsize=8, ncols=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def write(r: dict, docs: Path) -> None:
    chart(r, docs / "bench-compare.png")
    write_section(docs / "BENCHMARKS.md", BEGIN, END, tables(r) + "\n")


def write_section(page: Path, begin: str, end: str, text: str) -> None:
    """``text`` between ``begin`` and ``end`` in ``page`` (module docstring)."""
    body = page.read_text() if page.exists() else "# Benchmarks\n"
    block = f"{begin}\n{text}{end}"
    if begin in body and end in body:
        head, rest = body.split(begin, 1)
        body = head + block + rest.split(end, 1)[1]
    else:
        body = body.rstrip() + "\n\n" + block + "\n"
    page.write_text(body)
