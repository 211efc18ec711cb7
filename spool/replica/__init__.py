"""Replication: a partition replica's state (``partition``), the broker's replicas
(``manager``) and the followers' fetch loops (``fetcher``). See REPLICATION in the
issue 14 design: ``replica`` imports storage, records, protocol, the cluster's
metadata image and util; never broker, coordinator or cli."""
