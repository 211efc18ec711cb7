"""Kafka Connect in Python: a runtime, its REST API, and the connectors Spool ships.

Modules (each one's docstring is its contract):

- ``api``: the plugin API (connectors, tasks, converters, transformations, ConfigDef).
- ``data``: Connect's schemas and values.
- ``plugins``: discovery through the ``spool.connect.plugins`` entry points.
- ``worker_config``, ``connector_config``: the worker's and a connector's keys
  (Kafka Connect's names; unknown worker keys are reported).
- ``converters/``, ``transforms/``: JSON, String, ByteArray and the registry's formats;
  the single message transforms and predicates.
- ``errors``: ``errors.tolerance``, retries, the dead letter queue.
- ``kafka_log``, ``offset_store``, ``config_log``, ``status_log``: the internal topics
  (``connect-offsets``, ``connect-configs``, ``connect-status``) in Kafka's record formats.
- ``worker``, ``source_task``, ``sink_task`` (``worker_task``: what both share):
  running connectors and tasks.
- ``herder``, ``herder_standalone``, ``herder_distributed``, ``membership``,
  ``assignor``: the cluster of workers (group protocol type ``connect``);
  ``herder_common`` and ``herder_offsets`` (KIP-875) are what both herders share,
  ``connect_protocol`` the group protocol's payloads, ``fencing`` KIP-618's zombie
  fencing of exactly-once source tasks (``Admin.fenceProducers`` over ``spool.net``).
- ``rest``: Kafka Connect's REST API; ``service``: the ``spool connect`` process.
- ``file``, ``postgres/``: the shipped connectors (FileStream, PostgreSQL CDC and sink).

Connect is a client beside the broker: it reaches Spool over the Kafka protocol only
(confluent-kafka, and ``spool.net`` for the group protocol), never broker internals.
"""
