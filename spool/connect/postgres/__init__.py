"""PostgreSQL connectors: the CDC source (Debezium's PostgreSQL connector) and the sink
(Debezium's JDBC sink).

- ``source``: ``PostgresConnector`` / ``PostgresSourceTask``: an initial consistent
  snapshot, then logical replication (``pgoutput``) from a slot it creates and owns,
  events in Debezium's envelope, the slot advanced only past acknowledged records.
- ``pgoutput``: the pgoutput protocol (v1) decoder.
- ``snapshot``: the initial snapshot from the slot's exported snapshot.
- ``pg_types``: PostgreSQL column types -> Connect schemas and values (Debezium's defaults).
- ``envelope``: the envelope's schemas, shared by the source and the sink.
- ``sink``: ``JdbcSinkConnector`` / ``JdbcSinkTask``; ``sink_records`` (what a record
  asks of the table), ``sink_sql`` (names, column types, statements).
"""
