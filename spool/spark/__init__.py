"""Spool as a PySpark data source (``pip install spool[spark]``).

``spark.read.format("spool")`` / ``readStream`` / ``write`` /
``writeStream`` with the option names and row schema of Spark's own Kafka
connector. Registered automatically through the top-level ``pyspark_spool``
module; ``spark.dataSource.register(SpoolDataSource)`` also works.
"""

from spool.spark.source import SpoolDataSource

__all__ = ["SpoolDataSource"]
