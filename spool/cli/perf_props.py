"""Client properties for ``spool perf``, given as Kafka's perf tools take them.

Contract:

- :func:`read` merges a Java properties file (``--producer.config`` /
  ``--consumer.config``) with ``key=value`` pairs (``--producer-props``), the pairs
  winning, as in Kafka's ProducerPerformance. A pair splits at its first ``=``; values
  keep their commas (``bootstrap.servers=a:9092,b:9092``). Bad input raises
  :class:`~spool.cli.common.CliError` with one line (exit 2; an unreadable file 1).
- :func:`librdkafka` turns Kafka's Java client names into confluent-kafka settings:
  the security keys that ``--command-config`` understands (``security.protocol``,
  ``ssl.*``, ``sasl.*``) go through :mod:`spool.cli.command_config` (so the same file
  works for both); the Java serializer classes are dropped (the perf tools send bytes);
  ``buffer.memory`` becomes ``queue.buffering.max.kbytes`` and ``max.request.size``
  ``message.max.bytes``; every other key is passed on as it is (librdkafka shares most
  of Kafka's names: ``acks``, ``linger.ms``, ``batch.size``, ``compression.type``,
  ``enable.idempotence``, ``transactional.id``, ``bootstrap.servers``,
  ``group.protocol``, ...). A name librdkafka does not know fails when the client is
  built (:func:`build`), as one line naming the option it came from.
- :func:`split_args` sorts the command's positional words into TOPIC and the
  ``k=v`` words that followed ``--producer-props`` (Kafka's option takes several).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from spool.cli import command_config as _cc
from spool.cli.common import CliError
from spool.util.properties import parse_properties

_DROPPED = {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
_SECURITY_PREFIXES = ("security.", "ssl.", "sasl.")
_CONNECTION = {"bootstrap.servers", "client.id"}

C = TypeVar("C")


def read(path: str | None, pairs: Iterable[str], option: str) -> dict[str, str]:
    """The file's properties, then ``pairs`` over them (module docstring)."""
    props: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CliError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
        props.update(parse_properties(text))
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option}: invalid property '{pair}' (expected key=value)", 2)
        props[key.strip()] = value.strip()
    return props


def librdkafka(props: dict[str, str], option: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """confluent-kafka settings for Kafka client ``props`` (module docstring): those that
    reach the cluster (bootstrap, client id, security: fit for an AdminClient too) and
    the client's own."""
    security = {k: v for k, v in props.items() if k.startswith(_SECURITY_PREFIXES)}
    connection: dict[str, Any] = {}
    if security:
        try:
            connection.update(_cc.from_properties(security, option).librdkafka())
        except _cc.CommandConfigError as e:
            raise CliError(f"{option}: {e}", 2) from None
    conf: dict[str, Any] = {}
    for key, value in props.items():
        if key in security or key in _DROPPED:
            continue
        if key in _CONNECTION:
            connection[key] = value
        elif key == "buffer.memory":
            conf["queue.buffering.max.kbytes"] = max(1, int(_number(key, value, option)) // 1024)
        elif key == "max.request.size":
            conf["message.max.bytes"] = value
        else:
            conf[key] = value
    return connection, conf


def build(factory: Callable[[dict[str, Any]], C], conf: dict[str, Any], option: str) -> C:
    """``factory(conf)``; a setting the client refuses becomes one line naming ``option``."""
    try:
        return factory(conf)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        text = err.str() if hasattr(err, "str") else str(err)
        raise CliError(f"{option}: {text}", 2) from None
    except (TypeError, ValueError) as e:
        raise CliError(f"{option}: {e}", 2) from None


def split_args(args: list[str] | None, topic_opt: str | None,
               props_given: bool) -> tuple[str, list[str]]:
    """TOPIC and the ``k=v`` words that followed ``--producer-props`` (Kafka's nargs+).

    A topic name never holds ``=``, so every positional word with one is a property.
    """
    words = list(args or [])
    props = [w for w in words if "=" in w]
    names = [w for w in words if "=" not in w]
    if props and not props_given:
        raise CliError(f"unexpected argument '{props[0]}'", 2)
    if topic_opt is not None:
        names.append(topic_opt)
    if not names:
        raise CliError("a topic is required (TOPIC or --topic)", 2)
    if len(names) > 1:
        raise CliError(f"one topic only, got {', '.join(names)}", 2)
    return names[0], props


def _number(key: str, value: str, option: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise CliError(f"{option}: {key}={value} is not a number", 2) from None
