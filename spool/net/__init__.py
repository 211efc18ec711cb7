"""Talking Kafka to other nodes: an asyncio request client over ``spool.protocol``.

Used by the broker (node to node: quorum, registration, forwarding) and by the
CLI. Imports ``spool.protocol`` and ``spool.util`` only.
"""
