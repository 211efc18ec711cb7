"""Spool's schema registry: Confluent's REST API (v1) over a compacted ``_schemas`` topic.

A service beside the broker, a Kafka client of it and never of broker internals
(import-linter holds that). Any number of instances serve reads from their own copy
of the topic; one, elected through a consumer group, writes; the others forward
writes to it over HTTP, as Confluent's and Karapace's registries do.

Modules:
  model         the records of ``_schemas`` (Confluent's key and value JSON), the
                values the API returns, the registry's errors with Confluent's codes,
                and ``Registry``, what the HTTP layer asks of the backend.
  store         the state machine: subjects, versions, ids, configs, modes, built
                only by applying ``_schemas`` records in offset order.
  backend       the Kafka side: tails ``_schemas``, elects the writer, writes,
                waits until its own copy has applied what it wrote; implements
                ``model.Registry``.
  compatibility the compatibility levels (BACKWARD ... FULL_TRANSITIVE) over a
                format's reader/writer check.
  formats/      one module per schema type (avro, json_schema, protobuf), each a
                ``formats.Format``: parse, canonical form, reader/writer check.
  api           the aiohttp application: routes, media types, Confluent's errors.
  service       ``spool registry`` and the broker's ``schema.registry.listeners``:
                runs the backend and the API on one event loop.
"""
