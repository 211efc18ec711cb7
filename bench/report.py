"""Turn ``bench.compare`` results into the tables of docs/BENCHMARKS.md and a PNG chart.

The comparison lives between ``<!-- compare:begin -->`` and
``<!-- compare:end -->`` in BENCHMARKS.md; the rest of the page is left as
it is. The chart (docs/bench-compare.png) shows produce and consume
records/s per workload, Spool beside the reference, with min-max bars.

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


def tables(r: dict) -> str:
    out = [
        "## Spool against a reference broker (`python -m bench.compare`)",
        "",
        "Tansu 0.6 (Rust, `memory://` storage) and Spool (writing to disk), both on",
        "127.0.0.1, driven by the same confluent-kafka 2.16.1 workloads, taking turns",
        f"in each of {r['runs']} runs (median, min-max). Records/s.",
        "",
        "| workload | | Spool | Tansu | Spool / Tansu | Spool CPU s | Tansu CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, w in r["throughput"].items():
        s, t, size = w["spool"], w["tansu"], w["size"]
        for op in ("produce", "consume"):
            ratio = s[op]["median"] / t[op]["median"]
            out.append(
                f"| {name} | {op} | {_rate(s[op], size)} | {_rate(t[op], size)} | {ratio:.2f} "
                f"| {s[op + '_cpu']['median']:.2f} | {t[op + '_cpu']['median']:.2f} |"
            )
    out += ["", "Client ceiling (records merely enqueued into librdkafka, no broker):", ""]
    for size, c in r["ceiling"].items():
        out.append(f"- {size} B: {c['median']:,.0f} records/s ({c['min']:,.0f}-{c['max']:,.0f})")
    for name, w in r["throughput"].items():
        size = w["size"]
        if str(size) in r["ceiling"]:
            ceil = r["ceiling"][str(size)]["median"]
            out.append(f"  - {name}: Spool produce = {w['spool']['produce']['median'] / ceil:.0%} "
                       f"of the ceiling, Tansu {w['tansu']['produce']['median'] / ceil:.0%}")
    out += ["", "Latency at 10,000 records/s (100 B, acks=1, linger.ms=0), milliseconds:", "",
            "| | Spool p50 | Spool p99 | Tansu p50 | Tansu p99 |", "|---|---|---|---|---|"]
    for kind, lat in r["latency"].items():
        s, t = lat["spool"], lat["tansu"]
        out.append(f"| {kind} | {s['p50']['median']:.2f} | {s['p99']['median']:.2f} "
                   f"| {t['p50']['median']:.2f} | {t['p99']['median']:.2f} |")
    out += ["", "Brokers over the whole benchmark:", ""]
    for name, b in r["brokers"].items():
        out.append(f"- {name}: {b['cpu_seconds_total']:.1f} CPU seconds, peak RSS {b['peak_rss_mb']:.0f} MB")
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
        ax.set_xticks(list(xs), [n.split(":")[1].strip() for n in names], rotation=15, fontsize=8)
        ax.set_title(f"{op} (records/s, median of {r['runs']})")
        ax.legend()
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
