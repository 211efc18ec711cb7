"""The web console: a Kafka client app that shows a cluster in a browser.

Server-rendered HTML from the standard library's ``http.server``: no JavaScript build,
no external asset (the charts are inline SVG, refreshed by a few lines of inline
JavaScript). It reads the cluster over Kafka's protocol only (confluent-kafka's
AdminClient and Consumer, ``spool.net`` for DescribeLogDirs), never broker internals,
so it works against any Kafka cluster.

Run it with ``spool console --bootstrap-server B --listen http://127.0.0.1:8080`` or
inside a broker (``console.listeners=http://127.0.0.1:8080``). Modules: ``server``
(the HTTP server and ``Console``), ``pages`` (the routes, overview and group pages),
``topic_pages`` (topics, messages), ``web`` (what pages share), ``render`` (HTML and
SVG), ``cluster`` (the reads) and ``model`` (their answers), ``sampler`` (throughput
and lag history), ``log_dirs`` (partition sizes); its address is parsed by
``spool.util.listen``.
"""
