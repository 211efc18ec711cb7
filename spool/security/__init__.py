"""Security: who a connection is (TLS, SASL), what it may do (ACLs), how fast (quotas).

Sans-I/O where it can be: the SASL mechanisms are state machines fed bytes; the
authorizer is a pure function of the ACL bindings; the quota manager of its clock.
The broker (``spool.broker``) wires them to connections and handlers. This package
imports ``spool.protocol`` and ``spool.util`` only (DESIGN's layers).
"""
