"""Single message transforms and predicates, as Kafka's ``org.apache.kafka.connect.transforms``.

- ``fields``: InsertField, ReplaceField, MaskField, ExtractField (each ``$Key`` and
  ``$Value``), ValueToKey.
- ``routing``: TimestampRouter, RegexRouter, Filter.
- ``structure``: Flatten, HoistField, Cast, SetSchemaMetadata (``$Key``/``$Value``),
  InsertHeader, DropHeaders.
- ``timestamps``: TimestampConverter (``$Key``/``$Value``).
- ``debezium``: Debezium's ExtractNewRecordState (an envelope to its row).
- ``predicates``: TopicNameMatches, HasHeaderKey, RecordIsTombstone.
- ``chain``: ``TransformationChain``, a connector's ``transforms``/``predicates`` keys
  turned into the stages each record goes through.
"""
