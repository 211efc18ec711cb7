"""Auto-registration hook: pyspark imports every top-level ``pyspark_*`` module and
registers its ``DefaultSource``, so ``format("spool")`` works without a register call."""

from spool.spark.source import SpoolDataSource as DefaultSource

__all__ = ["DefaultSource"]
