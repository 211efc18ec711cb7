"""Shared bits of the example pipelines: arguments and the local SparkSession."""

from __future__ import annotations

import argparse

from spool.spark.capabilities import supports_transactions


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="Spool bootstrap servers")
    p.add_argument("--scratch", default=None, help="Spark scratch directory (default: a temp dir)")
    return p


def session(app: str, scratch: str | None = None):
    from spool.spark.session import local_session

    return local_session(app, local_dir=scratch)


def delivery_guarantee(bootstrap: str, wanted: str) -> str:
    """``auto``: exactly-once when the broker has transactions, else at-least-once (said aloud)."""
    if wanted != "auto":
        return wanted
    if supports_transactions(bootstrap):
        return "exactly-once"
    print("note: the broker has no transactions yet; writing at-least-once")
    return "at-least-once"
