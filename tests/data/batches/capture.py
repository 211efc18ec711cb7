"""Capture real clients' RecordBatch v2 bytes as golden files (run by hand, not by pytest).

    .venv/bin/python -m tests.data.batches.capture            # every client, every codec
    .venv/bin/python -m tests.data.batches.capture librdkafka

A throwaway fake broker on 127.0.0.1 (raw sockets, hand-written responses,
independent of spool's codec) answers just enough for a producer: ApiVersions
(v3+ gets error 35 and a v0 body, as Kafka does), Metadata v0-1 (one broker,
every topic asked for has one partition led by it) and Produce v3-7, whose
records bytes it saves. Each capture writes ``<client>-<version>-<codec>.bin``
(the batches exactly as received, concatenated) and a ``.json`` sidecar with
what was produced (hex keys/values) for ``tests/compat/test_client_batches.py``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOPIC = "golden"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BASE_TIMESTAMP = 1_700_000_000_000

# (api_key, min, max) we advertise. Never called, but librdkafka gates features on
# them: Fetch 4-10 (MsgVer2, zstd) and FindCoordinator 0 (lz4; without it
# librdkafka silently sends lz4 batches uncompressed).
# InitProducerId 0-1 lets librdkafka's idempotent producer start.
APIS = ((0, 3, 7), (1, 4, 10), (3, 0, 1), (10, 0, 0), (18, 0, 0), (22, 0, 1))
PRODUCER_ID, PRODUCER_EPOCH = 4242, 3


def sample_records(null_header_value: bool = True) -> list[dict]:
    """What each client produces: keys, null key, null value, headers, timestamps.

    kafka-python and aiokafka refuse a null header value; they get b"-" instead.
    """
    records = []
    for i in range(12):
        value = None if i == 5 else (f"value-{i:03d} " * 20).encode()
        key = None if i in (3, 7) else f"key-{i}".encode()
        headers = [("trace", f"t{i}".encode())] if i % 2 == 0 else []
        if i == 4:
            headers = [("a", b"1"), ("empty", b""), ("nul", None if null_header_value else b"-")]
        records.append(
            {"key": key, "value": value, "headers": headers, "timestamp": BASE_TIMESTAMP + i * 7}
        )
    return records


# --- a fake broker -----------------------------------------------------------------


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def raw(self, n: int) -> bytes:
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


class FakeBroker:
    """Accepts connections, answers requests, collects produced records bytes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.batches: list[bytes] = []
        self.offset = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = _recv(conn, 4)
                if head is None:
                    return
                frame = _recv(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                response = self._handle(frame)
                if response is not None:
                    conn.sendall(struct.pack(">i", len(response)) + response)

    def _handle(self, frame: bytes) -> bytes | None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        header = struct.pack(">i", correlation_id)  # response header v0
        if api_key == 18:
            error = 0 if version == 0 else 35
            body = struct.pack(">hi", error, len(APIS))
            body += b"".join(struct.pack(">hhh", *api) for api in APIS)
            return header + body
        r = _Reader(frame)
        r.pos = 8
        r.string()  # client_id
        if api_key == 3:
            return header + self._metadata(r, version)
        if api_key == 0:
            return self._produce(r, version, header)
        if api_key == 22:  # InitProducerId v0-1: throttle, error, producer id, epoch
            return header + struct.pack(">ihqh", 0, 0, PRODUCER_ID, PRODUCER_EPOCH)
        raise RuntimeError(f"fake broker got api_key {api_key} v{version}")

    def _metadata(self, r: _Reader, version: int) -> bytes:
        n = r.take(">i")
        topics = [r.string() for _ in range(max(n, 0))] or [TOPIC]
        body = struct.pack(">i", 1) + struct.pack(">i", 0) + _str("127.0.0.1")
        body += struct.pack(">i", self.port)
        if version >= 1:
            body += _str(None) + struct.pack(">i", 0)  # rack, controller_id
        body += struct.pack(">i", len(topics))
        for t in topics:
            body += struct.pack(">h", 0) + _str(t)
            if version >= 1:
                body += b"\x00"  # is_internal
            body += struct.pack(">i", 1) + struct.pack(">hii", 0, 0, 0)
            body += struct.pack(">ii", 1, 0) + struct.pack(">ii", 1, 0)  # replicas, isr
        return body

    def _produce(self, r: _Reader, version: int, header: bytes) -> bytes | None:
        r.string()  # transactional_id
        acks = r.take(">h")
        r.take(">i")  # timeout
        result = []
        for _ in range(r.take(">i")):
            name = r.string()
            parts = []
            for _ in range(r.take(">i")):
                partition = r.take(">i")
                n = r.take(">i")
                records = r.raw(n) if n >= 0 else b""
                with self.lock:
                    self.batches.append(records)
                    base = self.offset
                    self.offset += 1000
                parts.append((partition, base))
            result.append((name, parts))
        if acks == 0:
            return None
        body = struct.pack(">i", len(result))
        for name, parts in result:
            body += _str(name) + struct.pack(">i", len(parts))
            for partition, base in parts:
                body += struct.pack(">ihqq", partition, 0, base, -1)
                if version >= 5:
                    body += struct.pack(">q", 0)
        return header + body + struct.pack(">i", 0)


def _recv(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


# --- the clients -------------------------------------------------------------------


def produce_librdkafka(port: int, codec: str, records: list[dict], idempotent: bool = False) -> str:
    import confluent_kafka

    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "compression.type": codec,
            "linger.ms": 50,
            "enable.idempotence": idempotent,
        }
    )
    for rec in records:
        p.produce(
            TOPIC,
            value=rec["value"],
            key=rec["key"],
            headers=rec["headers"] or None,
            timestamp=rec["timestamp"],
            partition=0,
        )
    if p.flush(10) != 0:
        raise RuntimeError("librdkafka did not deliver")
    suffix = "-idempotent" if idempotent else ""
    return f"librdkafka-{confluent_kafka.libversion()[0]}{suffix}"


def produce_librdkafka_idempotent(port: int, codec: str, records: list[dict]) -> str:
    return produce_librdkafka(port, codec, records, idempotent=True)


def produce_kafka_python(port: int, codec: str, records: list[dict]) -> str:
    import kafka

    p = kafka.KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        compression_type=None if codec == "none" else codec,
        linger_ms=50,
        enable_idempotence=False,
    )
    for rec in records:
        p.send(
            TOPIC,
            value=rec["value"],
            key=rec["key"],
            headers=rec["headers"],
            timestamp_ms=rec["timestamp"],
            partition=0,
        )
    p.flush(10)
    p.close(5)
    return f"kafka-python-{kafka.__version__}"


def produce_aiokafka(port: int, codec: str, records: list[dict]) -> str:
    import aiokafka

    async def run() -> None:
        p = aiokafka.AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}",
            compression_type=None if codec == "none" else codec,
            linger_ms=50,
            enable_idempotence=False,
        )
        await p.start()
        try:
            futures = [
                await p.send(
                    TOPIC,
                    value=rec["value"],
                    key=rec["key"],
                    headers=rec["headers"],
                    timestamp_ms=rec["timestamp"],
                    partition=0,
                )
                for rec in records
            ]
            await asyncio.gather(*futures)
        finally:
            await p.stop()

    asyncio.run(run())
    return f"aiokafka-{aiokafka.__version__}"


CLIENTS = {
    "librdkafka": produce_librdkafka,
    "librdkafka-idempotent": produce_librdkafka_idempotent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def capture(client: str, codec: str) -> Path:
    broker = FakeBroker()
    try:
        records = sample_records(null_header_value=client.startswith("librdkafka"))
        name = CLIENTS[client](broker.port, codec, records)
    finally:
        broker.close()
    stem = f"{name}-{codec}"
    (HERE / f"{stem}.bin").write_bytes(b"".join(broker.batches))
    sidecar = {
        "client": name,
        "codec": codec,
        "topic": TOPIC,
        "produce_requests": len(broker.batches),
        "producer_id": PRODUCER_ID if "idempotent" in client else -1,
        "producer_epoch": PRODUCER_EPOCH if "idempotent" in client else -1,
        "records": [
            {
                "key": _hex(r["key"]),
                "value": _hex(r["value"]),
                "headers": [[k, _hex(v)] for k, v in r["headers"]],
                "timestamp": r["timestamp"],
            }
            for r in records
        ],
    }
    (HERE / f"{stem}.json").write_text(json.dumps(sidecar, indent=1) + "\n")
    return HERE / f"{stem}.bin"


def main(argv: list[str]) -> None:
    for client in argv or list(CLIENTS):
        for codec in CODECS:
            if client == "kafka-python" and codec == "snappy":
                continue  # kafka-python's snappy needs python-snappy, not installed
            if client == "librdkafka-idempotent" and codec not in ("none", "zstd"):
                continue
            path = capture(client, codec)
            print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
