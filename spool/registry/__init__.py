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
  core          Confluent's semantics over a Store (ids, dedupe, compatibility, modes,
                deletes, references); writes through an ``append`` it is given.
  compatibility the compatibility levels (BACKWARD ... FULL_TRANSITIVE) over a
                format's reader/writer check.
  formats/      one module per schema type (avro + avro_resolution, json_schema +
                json_diff/json_keywords/json_merge, protobuf), each a ``formats.Format``:
                parse, canonical form, reader/writer check.
  schemas_log   the ``_schemas`` topic: created, tailed into the Store, written.
  election      the writer: the consumer-group member assigned partition 0.
  forward       a non-primary's writes sent to the primary as REST calls.
  backend       ``KafkaRegistry``: ``model.Registry`` over the three above and core.
  api, api_http the aiohttp application: routes; media types, errors, parsing.
  api_format    the ``format`` and ``normalize`` query parameters.
  auth, permissions  HTTP basic checked against the cluster's SASL users; per-subject
                rules.
  service       ``spool registry`` and the broker's ``schema.registry.listeners``:
                runs the backend and the API on one event loop.
  client        a small blocking client of the REST API (``spool schemas``, Spark).
"""
