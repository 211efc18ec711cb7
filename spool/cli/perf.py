"""``spool perf produce|consume TOPIC``: Kafka's producer and consumer perf tests.

Contract (``produce``; ``consume`` is :mod:`spool.cli.perf_consume`):

- Kafka's ProducerPerformance options: ``--num-records N`` (required, > 0); exactly
  one of ``--record-size B`` (> 0; random upper-case letters, as Kafka's),
  ``--payload-file F`` (UTF-8 text split at ``--payload-delimiter``, default a
  newline; each record one of them at random) or ``--payload-monotonic`` (the
  record's number as text); ``--throughput R`` records/s (-1, the default:
  unthrottled; Kafka's throttler); ``--producer-props k=v ...`` and
  ``--producer.config FILE`` (Kafka client properties, see
  :mod:`spool.cli.perf_props`); ``--transactional-id`` /
  ``--transaction-duration-ms`` (a transaction committed every that many ms). The
  topic is TOPIC or ``--topic``. Spool's own: ``--acks``, ``--compression`` (over
  the properties), ``--partitions N`` / ``--replication-factor R`` (create the topic
  when it does not exist; an existing topic is used as it is, with a note if its
  partition count differs; without ``--partitions`` a missing topic is an error: the
  tool never relies on auto-creation), ``--reporting-interval MS`` (5000).
- Records have no key. ``bootstrap.servers`` in the properties wins over
  ``--bootstrap-server``. The client id is ``perf-producer-client`` unless set.
- Latency, as Kafka's: from ``produce()`` to the delivery report of an acknowledged
  record (confluent-kafka's ``Message.latency()``, read when the report is served:
  by polling after every 64th record, or every record and while waiting when
  throttled or transactional, so the tool holds reports back by well under a
  millisecond). Only acknowledged records count; the first few failures are
  reported one line each.
- Output: every reporting interval, Kafka's window line on stderr ("N records
  sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency."); at the end
  Kafka's summary line on stdout, or with ``--json`` one JSON object: ``topic``,
  ``num_records`` (asked), ``records`` (acknowledged), ``failed``, ``bytes``,
  ``elapsed_ms``, ``records_per_sec``, ``mb_per_sec``, ``latency_avg_ms``,
  ``latency_max_ms``, ``latency_p50_ms``, ``latency_p95_ms``, ``latency_p99_ms``,
  ``latency_p999_ms`` (MB = 2^20 bytes). Exit 1 if any record was not delivered,
  2 on bad input (one line), 130 on Ctrl-C (after the summary of what was sent).
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spool.cli import perf_consume, perf_props
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    CliError,
    CommandConfigOpt,
    JsonFlag,
    check_topic_name,
    cli_command,
    client_config,
    client_props,
    error_line,
    no_such_topic,
    print_json,
    reach,
    result,
)
from spool.cli.perf_payloads import Payloads, read_payload_file
from spool.cli.perf_stats import ProducerStats, Throttler, total_line, window_line
from spool.cli.produce import Acks, Compression

app = typer.Typer(
    help="Performance tests: Kafka's producer and consumer perf tools.",
    no_args_is_help=True,
)

REACH_TIMEOUT = 10.0
_MAX_REPORTED = 5
# Delivery reports are served (and their latency read) after every POLL_EVERY records when
# unthrottled: a few hundred microseconds at these rates, against the Python cost of a
# poll per record (~20% of the loop)
POLL_EVERY = 64


def ensure_topic(client: Any, admin_conf: dict[str, Any], topic: str,
                 partitions: int | None, replication_factor: int | None) -> int:
    """The topic's partition count; creates it with ``partitions`` when it is missing."""
    md = reach(client, REACH_TIMEOUT, subject=topic)  # all topics: asking for one creates it
    if topic in md.topics and md.topics[topic].error is None:
        count = len(md.topics[topic].partitions)
        if partitions is not None and partitions != count:
            typer.echo(f"spool: topic '{topic}' exists with {count} partition"
                       f"{'s' if count > 1 else ''}; --partitions {partitions} not applied",
                       err=True)
        return count
    if partitions is None:
        raise no_such_topic(topic, "; --partitions N creates it")
    admin = AdminClient(admin_conf)
    new = NewTopic(topic, num_partitions=partitions,
                   replication_factor=replication_factor if replication_factor else -1)
    result(admin.create_topics([new])[topic], topic, REACH_TIMEOUT * 3)
    typer.echo(f"spool: created topic '{topic}' with {partitions} partition"
               f"{'s' if partitions > 1 else ''}", err=True)
    return partitions


class _Run:
    """One producer run: the stats, failures, progress and throttle waits."""

    def __init__(self, producer_conf: dict[str, Any], topic: str, n: int, interval_ms: int,
                 bootstrap: str, option: str) -> None:
        self.topic, self.n, self.bootstrap = topic, n, bootstrap
        self.interval = interval_ms / 1000.0
        self.stats = ProducerStats(n, time.monotonic())
        producer_conf["on_delivery"] = self.on_delivery
        self.producer = perf_props.build(Producer, producer_conf, option)

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.stats.record(msg.latency() * 1000.0, len(msg))
            return
        self.stats.failed += 1
        if self.stats.failed <= _MAX_REPORTED:
            line = error_line(err, self.topic, self.bootstrap)
            sys.stderr.write(f"spool: record not delivered: {line}\n")
        elif self.stats.failed == _MAX_REPORTED + 1:
            sys.stderr.write("spool: (further failures not shown)\n")

    def progress(self, now: float) -> None:
        if self.stats.window_due(now, self.interval):
            sys.stderr.write(window_line(self.stats.take_window(now)) + "\n")
            sys.stderr.flush()

    def wait(self, seconds: float) -> None:
        """Wait, serving delivery reports meanwhile (their latency stays honest)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.producer.poll(left)

    def send(self, payloads: Payloads, throughput: float, txn_ms: int | None) -> None:
        if throughput < 0 and txn_ms is None:
            self._send_unpaced(payloads)
        else:
            self._send_paced(payloads, throughput, txn_ms)

    def _produce(self, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(self.topic, value)
                return
            except BufferError:  # the local queue is full: let deliveries drain
                self.producer.poll(0.005)

    def _send_unpaced(self, payloads: Payloads) -> None:
        """The hot loop: reports served and the clock read every POLL_EVERY records."""
        produce, poll, topic, value = self.producer.produce, self.producer.poll, self.topic, \
            payloads.value
        for i in range(self.n):
            v = value(i)
            try:
                produce(topic, v)
            except BufferError:
                self._produce(v)
            if not i % POLL_EVERY:
                poll(0)
                self.progress(time.monotonic())

    def _send_paced(self, payloads: Payloads, throughput: float, txn_ms: int | None) -> None:
        """Kafka's loop: the throttle and the transaction clock checked at every record."""
        p = self.producer
        throttler = Throttler(throughput, self.stats.start)
        txn_start = None
        for i in range(self.n):
            value = payloads.value(i)
            now = time.monotonic()
            if txn_ms is not None and txn_start is None:
                p.begin_transaction()
                txn_start = now
            self._produce(value)
            p.poll(0)
            if txn_start is not None and (now - txn_start) * 1000.0 >= txn_ms:
                p.commit_transaction()
                txn_start = None
            self.progress(now)
            if throttler.should_throttle(i, now):
                owed = throttler.owed()
                if owed:
                    self.wait(owed)
        if txn_start is not None:
            p.commit_transaction()

    def drain(self, timeout: float) -> None:
        """Flush, still reporting progress; what is left after ``timeout`` s failed."""
        deadline = time.monotonic() + timeout
        while len(self.producer) and time.monotonic() < deadline:
            self.producer.poll(0.1)
            self.progress(time.monotonic())
        self.producer.flush(0)
        self.stats.failed += len(self.producer)


@cli_command
def produce(
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="TOPIC", help="Topic to write to (or --topic).", show_default=False),
    ] = None,
    topic_opt: Annotated[str | None, typer.Option("--topic", help="Topic (as Kafka's).")] = None,
    num_records: Annotated[
        int | None, typer.Option("--num-records", help="Number of records to produce.")
    ] = None,
    record_size: Annotated[
        int | None, typer.Option("--record-size", help="Record size in bytes (random letters).")
    ] = None,
    payload_file: Annotated[
        str | None,
        typer.Option("--payload-file", help="UTF-8 file of payloads; each record one at random."),
    ] = None,
    payload_delimiter: Annotated[
        str, typer.Option("--payload-delimiter", help="Payload separator in --payload-file.")
    ] = "\\n",
    payload_monotonic: Annotated[
        bool, typer.Option("--payload-monotonic", help="Payload: the record's number.")
    ] = False,
    throughput: Annotated[
        float, typer.Option("--throughput", help="Records/s at most; -1: unthrottled.")
    ] = -1.0,
    producer_props: Annotated[
        list[str] | None,
        typer.Option("--producer-props", metavar="PROP=VALUE ...",
                     help="Producer properties (Kafka's names); win over --producer.config."),
    ] = None,
    producer_config: Annotated[
        str | None, typer.Option("--producer.config", metavar="FILE",
                                 help="Producer properties file.")
    ] = None,
    transactional_id: Annotated[
        str | None, typer.Option("--transactional-id", help="Produce in transactions.")
    ] = None,
    transaction_duration_ms: Annotated[
        int | None, typer.Option("--transaction-duration-ms",
                                 help="Commit a transaction every MS (default 3000).")
    ] = None,
    acks: Annotated[Acks | None, typer.Option("--acks", help="0, 1 or all (-1).")] = None,
    compression: Annotated[
        Compression | None, typer.Option("--compression", help="Batch compression codec.")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", help="Create the topic with N partitions "
                                 "if it does not exist.")
    ] = None,
    replication_factor: Annotated[
        int | None, typer.Option("--replication-factor", help="Replicas of a created topic.")
    ] = None,
    reporting_interval: Annotated[
        int, typer.Option("--reporting-interval", metavar="MS", help="Progress every MS.")
    ] = 5000,
    json_out: JsonFlag = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOpt = None,
) -> None:
    """Produce N records as fast as allowed and report throughput and latency
    (kafka-producer-perf-test)."""
    topic, extra_props = perf_props.split_args(args, topic_opt, producer_props is not None)
    check_topic_name(topic)
    n = _check_produce(num_records, record_size, payload_file, payload_monotonic, throughput,
                       partitions, replication_factor, reporting_interval,
                       transaction_duration_ms)
    option = "--producer.config" if producer_props is None else "--producer-props"
    props = perf_props.read(producer_config, [*(producer_props or []), *extra_props], option)
    admin_conf, conf = producer_conf(bootstrap, props, acks, compression, option)
    txn_ms = transaction_duration_ms
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
    if txn_ms is not None and "transactional.id" not in conf:
        conf["transactional.id"] = f"performance-producer-{uuid.uuid4()}"
    if "transactional.id" in conf and txn_ms is None:
        txn_ms = 3000
    if not {"transactional.id", "message.timeout.ms", "delivery.timeout.ms"} & conf.keys():
        conf["message.timeout.ms"] = 120_000  # Kafka's delivery.timeout.ms default
    conf.update(client_props())  # -X has the last word
    choices = None
    if payload_file is not None:
        delimiter = "\n" if payload_delimiter == "\\n" else payload_delimiter
        choices = read_payload_file(payload_file, delimiter)
        sys.stderr.write(f"Reading payloads from: {Path(payload_file).resolve()}\n"
                         f"Number of messages read: {len(choices)}\n")
    payloads = Payloads(record_size, choices, n)

    run = _Run(conf, topic, n, reporting_interval, bootstrap, option)
    ensure_topic(run.producer, admin_conf, topic, partitions, replication_factor)
    if txn_ms is not None:
        run.producer.init_transactions(REACH_TIMEOUT * 3)
    run.stats = ProducerStats(n, time.monotonic())
    interrupted = False
    try:
        run.send(payloads, throughput, txn_ms)
    except KeyboardInterrupt:
        interrupted = True
    except KafkaException as e:
        raise CliError(error_line(e.args[0], topic, bootstrap)) from None
    run.drain(5.0 if interrupted else _delivery_timeout(conf) + 5.0)
    total = run.stats.total(time.monotonic())
    if json_out:
        print_json({"topic": topic, "num_records": n, **total})
    else:
        print(total_line(total), flush=True)
    if interrupted:
        raise CliError("interrupted", 130)
    if run.stats.failed:
        raise CliError(f"{run.stats.failed} of {n} records not delivered")


def producer_conf(bootstrap: str, props: dict[str, str], acks: Acks | None,
                  compression: Compression | None,
                  option: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An AdminClient's configuration (to create the topic) and the producer's."""
    admin = client_config(bootstrap)
    if admin.get("client.id") == "spool-cli":
        admin["client.id"] = "perf-producer-client"
    connection, own = perf_props.librdkafka(props, option)
    admin.update(connection)
    admin.update(client_props())
    conf = {**admin, **own}
    if acks is not None:
        conf["acks"] = "all" if acks in (Acks.all, Acks.all_) else acks.value
    if compression is not None:
        conf["compression.type"] = compression.value
    return admin, conf


def _delivery_timeout(conf: dict[str, Any]) -> float:
    for key in ("delivery.timeout.ms", "message.timeout.ms"):
        if key in conf:
            try:
                return float(conf[key]) / 1000.0
            except ValueError:
                pass
    return 120.0


def _check_produce(num_records: int | None, record_size: int | None, payload_file: str | None,
                   payload_monotonic: bool, throughput: float, partitions: int | None,
                   replication_factor: int | None, reporting_interval: int,
                   transaction_duration_ms: int | None) -> int:
    """Kafka's checks, each one line and exit 2; the number of records."""
    if num_records is None:
        raise CliError("--num-records is required", 2)
    if num_records <= 0:
        raise CliError("--num-records should be greater than zero", 2)
    given = [name for name, on in (("--record-size", record_size is not None),
                                   ("--payload-file", payload_file is not None),
                                   ("--payload-monotonic", payload_monotonic)) if on]
    if len(given) != 1:
        raise CliError("exactly one of --record-size, --payload-file or --payload-monotonic "
                       f"is required{' (got ' + ' and '.join(given) + ')' if given else ''}", 2)
    if record_size is not None and record_size <= 0:
        raise CliError("--record-size should be greater than zero", 2)
    if throughput == 0:
        raise CliError("--throughput should be positive (records/s) or -1 (unthrottled)", 2)
    if partitions is not None and partitions <= 0:
        raise CliError("--partitions should be greater than zero", 2)
    if replication_factor is not None and replication_factor <= 0:
        raise CliError("--replication-factor should be greater than zero", 2)
    if replication_factor is not None and partitions is None:
        raise CliError("--replication-factor needs --partitions (it applies to a created "
                       "topic)", 2)
    if reporting_interval <= 0:
        raise CliError("--reporting-interval should be greater than zero", 2)
    if transaction_duration_ms is not None and transaction_duration_ms <= 0:
        raise CliError("--transaction-duration-ms should be greater than zero", 2)
    return num_records


app.command("produce")(produce)
app.command("consume")(perf_consume.consume)
