"""Tests of orders.py against a real Kafka-protocol broker: Spool's pytest plugin gives
``spool_broker`` (one broker for the session) and ``spool_topic`` (a new topic per call,
deleted after the test). No Docker, no JVM."""

from orders import publish, totals


def test_totals_per_customer(spool_broker, spool_topic):
    topic = spool_topic(partitions=3)
    publish(spool_broker, topic, [
        {"customer": "ada", "amount": 5},
        {"customer": "bob", "amount": 7},
        {"customer": "ada", "amount": 10},
    ])
    assert totals(spool_broker, topic, group="billing") == {"ada": 15, "bob": 7}


def test_a_group_reads_only_what_is_new(spool_broker, spool_topic):
    topic = spool_topic(partitions=2)
    publish(spool_broker, topic, [{"customer": "ada", "amount": 1}])
    assert totals(spool_broker, topic, group="billing") == {"ada": 1}
    publish(spool_broker, topic, [{"customer": "cy", "amount": 4}])
    assert totals(spool_broker, topic, group="billing") == {"cy": 4}
    assert totals(spool_broker, topic, group="audit") == {"ada": 1, "cy": 4}
