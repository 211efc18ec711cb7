"""What SASL costs: connecting and authenticating, and requests once authenticated.

    python -m bench.sasl [--logins 300] [--requests 20000] [--no-write]

Starts one Spool broker (``tests.helpers.secure_broker``) with a SASL_PLAINTEXT and a
PLAINTEXT listener, a PLAIN user, SCRAM-SHA-256/512 credentials (4096 iterations,
Kafka's minimum) and unsecured OAUTHBEARER, then measures with a bare socket client
on Spool's codec and its sans-I/O SASL clients (``spool.security.sasl.client_for``):

* login: TCP connect, SaslHandshake v1, SaslAuthenticate v2 until done, one Metadata
  request, close; ``--logins`` times per mechanism (and a plaintext connect + Metadata
  for reference). The client's work is in the figure: SCRAM's PBKDF2 over the
  password (4096 HMACs) is on the client's side; the broker's side is a few HMACs;
* requests: ``--requests`` Metadata (no topics) requests, 100 in flight, on one
  authenticated SASL connection and on one plaintext connection: the per-frame gate a
  SASL listener adds once authenticated, and the one dict lookup a PLAINTEXT frame pays.

Reported: milliseconds per login (median, p90), requests/s (median of 3, min-max).
Results go to ``docs/bench-sasl.json`` and to the section between
``<!-- sasl:begin -->`` and ``<!-- sasl:end -->`` of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.compare import pct, stats
from bench.reliability.common import commit
from spool.protocol._generated import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from spool.security.sasl import client_for
from tests.helpers.raw_client import RawClient
from tests.helpers.secure_broker import SecureBroker

DOCS = Path(__file__).resolve().parent.parent / "docs"
BEGIN = "<!-- sasl:begin -->"
END = "<!-- sasl:end -->"
USER = ("alice", "alice-secret")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
OAUTH = {"unsecuredLoginStringClaim_sub": USER[0]}


def login(bootstrap: str, mechanism: str | None) -> RawClient:
    """A connection authenticated with ``mechanism`` (None: plaintext)."""
    c = RawClient(bootstrap)
    if mechanism is None:
        return c
    client = client_for(mechanism, *USER, OAUTH)
    assert c.request(17, 1, SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
    token = client.initial_response()
    while token is not None:
        resp = c.request(36, 2, SaslAuthenticateRequest(auth_bytes=token))
        assert resp.error_code == 0, resp.error_message
        token = client.evaluate(resp.auth_bytes)
    return c


def logins(bootstrap: str, mechanism: str | None, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        c = login(bootstrap, mechanism)
        try:
            assert c.request(3, 12, MetadataRequest(topics=[])).brokers
        finally:
            c.close()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def requests(c: RawClient, n: int, window: int = 100) -> float:
    """Metadata requests/s, ``window`` in flight."""
    t0 = time.perf_counter()
    sent = done = 0
    while done < n:
        while sent < n and sent - done < window:
            c.send(3, 12, MetadataRequest(topics=[]))
            sent += 1
        c.recv(3, 12)
        done += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logins", type=int, default=300)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sasl-") as tmp:
        broker = SecureBroker(Path(tmp) / "data", listeners=("SASL_PLAINTEXT", "PLAINTEXT"),
                              plain_users=dict([USER]), scram_users=dict([USER]),
                              mechanisms=MECHANISMS)
        broker.start()
        try:
            sasl, plain = broker.bootstrap("SASL_PLAINTEXT"), broker.bootstrap("PLAINTEXT")
            login_ms = {"PLAINTEXT (no SASL)": logins(plain, None, args.logins)}
            for mech in MECHANISMS:
                login_ms[mech] = logins(sasl, mech, args.logins)
            rates: dict[str, list[float]] = {"SASL_PLAINTEXT (PLAIN)": [], "PLAINTEXT": []}
            for _ in range(3):
                for name, (addr, mech) in {"SASL_PLAINTEXT (PLAIN)": (sasl, "PLAIN"),
                                           "PLAINTEXT": (plain, None)}.items():
                    c = login(addr, mech)
                    try:
                        rates[name].append(requests(c, args.requests))
                    finally:
                        c.close()
        finally:
            broker.stop()
    results = {
        "commit": commit(), "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "cores": os.cpu_count(), "logins": args.logins, "requests": args.requests,
        "login_ms": {k: {"median": stats(v)["median"], "p90": pct(v, 0.9)}
                     for k, v in login_ms.items()},
        "requests_per_s": {k: stats(v) for k, v in rates.items()},
    }
    text = section(results)
    print(text)
    if not args.no_write:
        (DOCS / "bench-sasl.json").write_text(json.dumps(results, indent=1) + "\n")
        write(text, DOCS / "BENCHMARKS.md")
        print("wrote docs/BENCHMARKS.md, docs/bench-sasl.json")


def section(r: dict) -> str:
    lines = [
        "## SASL: authentication and authenticated requests (`python -m bench.sasl`)",
        "",
        f"One broker, a client on the same machine ({r['cores']} shared cores); measured at "
        f"commit `{r['commit']}`, {r['finished_utc']} UTC. A login is TCP connect, "
        f"SaslHandshake, SaslAuthenticate until done and one Metadata request "
        f"({r['logins']} per row); SCRAM's PBKDF2 (4096 iterations) runs in the client and "
        f"is most of its figure.",
        "",
        "| login | median ms | p90 ms |",
        "|---|---:|---:|",
    ]
    for name, s in r["login_ms"].items():
        lines.append(f"| {name} | {s['median']:.2f} | {s['p90']:.2f} |")
    lines += ["", f"Metadata requests/s on one connection, 100 in flight ({r['requests']:,} "
                  f"requests, median of 3 (min-max)):", "",
              "| connection | requests/s |", "|---|---:|"]
    for name, s in r["requests_per_s"].items():
        lines.append(f"| {name} | {s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f}) |")
    a, b = r["requests_per_s"].values()
    overlap = a["min"] <= b["max"] and b["min"] <= a["max"]
    lines += ["", "Once authenticated, a SASL connection's frames pay a look at the header's "
                  "API key and a session-expiry test before the usual dispatch (a PLAINTEXT "
                  "frame: one dict lookup). "
                  + ("The two rows' ranges overlap: the difference is this shared machine's "
                     "run-to-run spread." if overlap else
                     "The two rows' ranges do not overlap in this run.")]
    return "\n".join(lines) + "\n"


def write(text: str, page: Path) -> None:
    body = page.read_text(encoding="utf-8") if page.exists() else ""
    block = f"{BEGIN}\n{text}{END}"
    if BEGIN in body and END in body:
        head, rest = body.split(BEGIN, 1)
        body = head + block + rest.split(END, 1)[1]
    else:
        body = body.rstrip("\n") + "\n\n" + block + "\n"
    page.write_text(body, encoding="utf-8")


if __name__ == "__main__":
    main()
