"""A loopback-bound, quiet SparkSession for tests, examples and benchmarks.

``local_session()`` sets what SPARK.md lists as the pitfalls: loopback
addresses, the current interpreter for driver and workers, no UI, few
shuffle partitions, Spark's scratch space under ``local_dir`` and an
ERROR-level log4j2 configuration. ``master`` is ``local[N]`` by default
(``cores``) or a standalone master's ``spark://host:port``: the same
settings then go to the executors the cluster starts.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def local_session(
    app: str = "spool",
    cores: int = 2,
    local_dir: str | os.PathLike | None = None,
    shuffle_partitions: int = 2,
    master: str | None = None,
):
    from pyspark.sql import SparkSession

    scratch = Path(local_dir or tempfile.mkdtemp(prefix="spool-spark-"))
    scratch.mkdir(parents=True, exist_ok=True)
    log4j = scratch / "log4j2.properties"
    log4j.write_text(_LOG4J)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("TMPDIR", str(scratch))
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Djava.io.tmpdir={scratch}"
    spark = (
        SparkSession.builder.master(master or f"local[{cores}]")
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.local.dir", str(scratch))
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
