"""TLS listeners as Kafka users configure them, with confluent-kafka, kafka-python, aiokafka.

One broker for the module (certificates made with ``cryptography``,
``tests.helpers.certs``), with four listeners:

- PLAINTEXT;
- SSL: PEM keystore file, no client certificate asked;
- MTLS (mapped to SSL): PKCS12 keystore and truststore, ``ssl.client.auth=required``,
  ``ssl.principal.mapping.rules`` naming ``CN=<x>,OU=eng,...`` subjects ``<x>`` lowercased;
- OPT (mapped to SSL): inline PEM keystore and truststore, ``ssl.client.auth=requested``,
  its own mapping rules without DEFAULT (a subject no rule maps is refused).

Which principal a connection got shows as a user sees it: the StandardAuthorizer is on,
with ``super.users`` User:alice (the mapped name of ``CN=Alice,OU=eng,O=Acme``),
User:CN=carol,O=Other (DEFAULT rule: the subject itself) and User:ANONYMOUS; anyone else
is allowed no cluster operation (describe_cluster's authorized operations).
"""

from __future__ import annotations

import asyncio
import random
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from cryptography import x509

from tests.helpers.certs import PASSWORD, Pki

pytestmark = pytest.mark.timeout(180)

_LINE = re.compile(r"listening on ([0-9.]+):(\d+) \((\w+)\)")
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
               AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
               AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
RECORDS = [f"{i:05d}".encode() * 200 for i in range(200)]  # 1000 bytes each
# 6 MiB of random bytes: fetch responses span many TLS records and several 256 KiB chunks
BIG = [random.Random(i).randbytes(1024) for i in range(6144)]


class Broker:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pki = Pki(tmp / "pki")
        self.server = self.pki.issue("CN=localhost", hosts=("127.0.0.1", "localhost"))
        self.alice = self.pki.issue("CN=Alice,OU=eng,O=Acme")
        self.bob = self.pki.issue("CN=Bob,OU=eng,O=Acme", key_password="bobpw")
        self.carol = self.pki.issue("CN=carol,O=Other")
        self.stranger_pki = Pki(tmp / "other-pki", "CN=Other CA")
        self.mallory = self.stranger_pki.issue("CN=Alice,OU=eng,O=Acme")
        self.log = tmp / "broker.log"
        s, p = self.server, self.pki
        overrides = {
            "log.dirs": str(tmp / "data"),
            "group.initial.rebalance.delay.ms": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,"
                         "OPT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,OPT:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(s.keystore_pem),
            "listener.name.mtls.ssl.keystore.type": "PKCS12",
            "listener.name.mtls.ssl.keystore.location": str(s.p12),
            "listener.name.mtls.ssl.keystore.password": PASSWORD,
            "listener.name.mtls.ssl.truststore.type": "PKCS12",
            "listener.name.mtls.ssl.truststore.location": str(p.truststore_p12),
            "listener.name.mtls.ssl.truststore.password": PASSWORD,
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT",
            "listener.name.opt.ssl.keystore.location": "",
            "listener.name.opt.ssl.keystore.certificate.chain": s.chain_text,
            "listener.name.opt.ssl.keystore.key": s.key_text,
            "listener.name.opt.ssl.truststore.type": "PEM",
            "listener.name.opt.ssl.truststore.certificates": p.ca_text,
            "listener.name.opt.ssl.client.auth": "requested",
            "listener.name.opt.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng,.*$/$1/L",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:alice;User:CN=carol,O=Other;User:ANONYMOUS",
            "spool.ssl.handshake.timeout.ms": "1500",
        }
        cmd = [sys.executable, "-m", "spool.cli.main", "broker", "--strict-config",
               "--log-level", "INFO"]
        for k, v in overrides.items():
            cmd += ["-o", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "wb"))  # noqa: SIM115
        self.ports: dict[str, int] = {}
        assert self.proc.stdout is not None
        for _ in range(4):
            m = _LINE.search(self.proc.stdout.readline().decode())
            if m is None:
                self.proc.kill()
                pytest.fail(f"broker did not start: {self.log.read_text()}")
            self.ports[m.group(3)] = int(m.group(2))

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            assert self.proc.wait(20) == 0
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(tmp_path_factory.mktemp("tls"))
    yield b
    b.stop()
    assert "Traceback" not in b.log.read_text()


def rdkafka(broker: Broker, listener: str, **extra) -> dict:
    conf = {"bootstrap.servers": broker.bootstrap(listener), "security.protocol": "SSL",
            "ssl.ca.location": str(broker.pki.ca_pem), "socket.timeout.ms": 5000,
            "message.timeout.ms": 10000}
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return conf


def produce_and_consume(conf: dict, topic: str, records: list[bytes] = RECORDS) -> list[bytes]:
    p = Producer(conf)
    for r in records:
        p.produce(topic, r)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(records) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def cluster_ops(conf: dict) -> set:
    """describe_cluster's authorized operations (librdkafka gives None for none)."""
    admin = AdminClient(conf)
    return set(admin.describe_cluster(include_authorized_operations=True).result(15)
               .authorized_operations or ())


def refused(conf: dict) -> None:
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=4)


def still_serves(broker: Broker) -> None:
    """The broker still answers a plaintext and a TLS client."""
    assert AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")}).list_topics(
        timeout=10).brokers
    assert AdminClient(rdkafka(broker, "SSL")).list_topics(timeout=10).brokers


# ---- server verification, the three clients


def test_confluent_kafka_verifies_the_broker_and_round_trips_records(broker, topic_name):
    conf = rdkafka(broker, "SSL")
    assert produce_and_consume(conf, topic_name, BIG) == BIG
    md = AdminClient(conf).list_topics(timeout=10)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", broker.ports["SSL"])]
    # a connection without a certificate is User:ANONYMOUS (a super user here)
    assert cluster_ops(conf) == CLUSTER_OPS


def test_kafka_python_verifies_the_broker_and_round_trips_records(broker, topic_name):
    from kafka import KafkaConsumer, KafkaProducer

    tls = {"security_protocol": "SSL", "ssl_cafile": str(broker.pki.ca_pem),
           "bootstrap_servers": broker.bootstrap("SSL")}
    producer = KafkaProducer(**tls)
    for r in RECORDS:
        producer.send(topic_name, r)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic_name, auto_offset_reset="earliest",
                             consumer_timeout_ms=30000, **tls)
    got: list[bytes] = []
    for m in consumer:
        got.append(m.value)
        if len(got) == len(RECORDS):
            break
    consumer.close()
    assert got == RECORDS


def test_aiokafka_with_a_client_certificate_round_trips_records(broker, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        ctx = create_ssl_context(cafile=str(broker.pki.ca_pem),
                                 certfile=str(broker.alice.cert_pem),
                                 keyfile=str(broker.alice.key_pem))
        tls = {"bootstrap_servers": broker.bootstrap("MTLS"), "security_protocol": "SSL",
               "ssl_context": ctx}
        producer = AIOKafkaProducer(**tls)
        await producer.start()
        try:
            for r in RECORDS:
                await producer.send(topic_name, r)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic_name, auto_offset_reset="earliest", **tls)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for m in consumer:
                    got.append(m.value)
                    if len(got) == len(RECORDS):
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == RECORDS


def test_a_broker_certificate_from_another_ca_is_refused_by_every_client(broker):
    refused(rdkafka(broker, "SSL", ssl_ca_location=str(broker.stranger_pki.ca_pem)))
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(bootstrap_servers=broker.bootstrap("SSL"), security_protocol="SSL",
                      ssl_cafile=str(broker.stranger_pki.ca_pem), bootstrap_timeout_ms=4000)
    still_serves(broker)


# ---- mTLS and principals


def test_mtls_required_refuses_clients_without_a_trusted_certificate(broker):
    refused(rdkafka(broker, "MTLS"))
    refused(rdkafka(broker, "MTLS", ssl_certificate_location=str(broker.mallory.cert_pem),
                    ssl_key_location=str(broker.mallory.key_pem)))
    assert "TLS handshake failed" in broker.log.read_text()
    still_serves(broker)


def test_mtls_principal_is_the_mapped_certificate_subject(broker):
    alice = rdkafka(broker, "MTLS", ssl_certificate_location=str(broker.alice.cert_pem),
                    ssl_key_location=str(broker.alice.key_pem))
    assert cluster_ops(alice) == CLUSTER_OPS  # CN=Alice,OU=eng,O=Acme -> User:alice
    bob = rdkafka(broker, "MTLS", ssl_certificate_location=str(broker.bob.cert_pem),
                  ssl_key_location=str(broker.bob.key_pem), ssl_key_password="bobpw")
    assert cluster_ops(bob) == set()  # User:bob
    carol = rdkafka(broker, "MTLS", ssl_keystore_location=str(broker.carol.p12),
                    ssl_keystore_password=PASSWORD)  # a PKCS12 client keystore
    assert cluster_ops(carol) == CLUSTER_OPS  # DEFAULT: User:CN=carol,O=Other


def test_mtls_requested_names_clients_that_present_a_certificate(broker, topic_name):
    anonymous = rdkafka(broker, "OPT")
    assert cluster_ops(anonymous) == CLUSTER_OPS  # User:ANONYMOUS
    bob = rdkafka(broker, "OPT", ssl_certificate_location=str(broker.bob.cert_pem),
                  ssl_key_location=str(broker.bob.key_pem), ssl_key_password="bobpw")
    assert cluster_ops(bob) == set()
    refused(rdkafka(broker, "OPT", ssl_certificate_location=str(broker.mallory.cert_pem),
                    ssl_key_location=str(broker.mallory.key_pem)))
    refused(rdkafka(broker, "OPT", ssl_certificate_location=str(broker.carol.cert_pem),
                    ssl_key_location=str(broker.carol.key_pem)))  # no rule maps CN=carol,O=Other
    assert "No rules apply to CN=carol,O=Other" in broker.log.read_text()
    assert produce_and_consume(anonymous, topic_name) == RECORDS


# ---- the wrong protocol on a port


def test_a_tls_client_on_the_plaintext_port_is_closed_without_a_traceback(broker):
    refused(rdkafka(broker, "PLAINTEXT"))
    with socket.create_connection(("127.0.0.1", broker.ports["PLAINTEXT"]), 5) as raw:
        ctx = ssl.create_default_context(cafile=str(broker.pki.ca_pem))
        with pytest.raises((ssl.SSLError, OSError)):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    still_serves(broker)


def test_a_plaintext_client_on_a_tls_port_is_closed_without_a_traceback(broker):
    refused({"bootstrap.servers": broker.bootstrap("SSL"), "socket.timeout.ms": 3000})
    # an ApiVersions v0 request, unencrypted
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", broker.ports["SSL"]), 5) as raw:
        raw.sendall(struct.pack(">i", len(body)) + body)
        raw.settimeout(10)
        assert _drain(raw) is not None  # closed (maybe after a TLS alert)
    still_serves(broker)


def _drain(sock: socket.socket) -> bytes | None:
    """Everything the peer sends until it closes; None if it does not within the timeout."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        return data
    except TimeoutError:
        return None
    return data


def test_a_stalled_handshake_holds_no_one_else_and_times_out(broker):
    silent = socket.create_connection(("127.0.0.1", broker.ports["SSL"]), 5)
    slow = socket.create_connection(("127.0.0.1", broker.ports["SSL"]), 5)
    hello = _client_hello(broker)
    slow.sendall(hello[: len(hello) // 2])  # half a ClientHello, never the rest
    try:
        still_serves(broker)  # meanwhile: others connect, handshake and are served
        for s in (silent, slow):
            s.settimeout(30)
            assert _drain(s) == b""  # spool.ssl.handshake.timeout.ms: closed by the broker
    finally:
        silent.close()
        slow.close()
    assert "TLS handshake not done after 1.5 s" in broker.log.read_text()


def _client_hello(broker: Broker) -> bytes:
    ctx = ssl.create_default_context(cafile=str(broker.pki.ca_pem))
    out = ssl.MemoryBIO()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()



# ---- certificate rotation


def _served_serial(broker: Broker, listener: str) -> int:
    ctx = ssl.create_default_context(cafile=str(broker.pki.ca_pem))
    with socket.create_connection(("127.0.0.1", broker.ports[listener]), 5) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def _alter(conf: dict, key: str, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    res = ConfigResource("broker", "0", incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])
    admin = AdminClient(conf)
    admin.incremental_alter_configs([res])[res].result(15)


def test_a_listener_keystore_changed_with_alter_configs_serves_new_connections(broker):
    key = "listener.name.ssl.ssl.keystore.location"
    plain = {"bootstrap.servers": broker.bootstrap("PLAINTEXT")}
    before = AdminClient(rdkafka(broker, "SSL"))
    assert before.list_topics(timeout=10).brokers  # a connection made before the change
    assert _served_serial(broker, "SSL") == broker.server.cert.serial_number
    rotated = broker.pki.issue("CN=localhost")
    _alter(plain, key, str(rotated.keystore_pem))
    try:
        assert _served_serial(broker, "SSL") == rotated.cert.serial_number
        assert _served_serial(broker, "MTLS") == broker.server.cert.serial_number  # its own
        assert before.list_topics(timeout=10).brokers
        with pytest.raises(KafkaException, match="Validation of dynamic config update of "
                           "SSLFactory failed: listener SSL://127.0.0.1:0: ssl.keystore.location="
                           "/nonexistent: cannot read it"):
            _alter(plain, key, "/nonexistent")
        assert _served_serial(broker, "SSL") == rotated.cert.serial_number
    finally:
        _alter(plain, key, None)
    assert _served_serial(broker, "SSL") == broker.server.cert.serial_number
