"""What every console page shares: the request and answer types, the context (the
cluster reader, the sampler, the settings), parameter parsing that fails as ``BadInput``
(a 400 naming the parameter), the page frame, and the live chart blocks.

A live chart block is a ``div`` whose ``data-refresh`` names the chart route that draws
it again (``spool.console.render``'s script refetches it every sample interval).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from spool.console.cluster import ClusterReader
from spool.console.model import BadInput
from spool.console.render import Markup, layout, line_chart, tag
from spool.console.sampler import Sampler


@dataclass
class Page:
    status: int
    body: str
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    method: str
    params: dict[str, str]  # path parameters
    query: dict[str, str]  # query string (GET) or form fields (POST); last value wins


@dataclass
class Context:
    reader: ClusterReader
    sampler: Sampler
    refresh_ms: int
    read_only: bool = False  # no create/delete forms; their routes answer 403

    @property
    def cluster(self) -> str:
        return self.reader.bootstrap


def quote_name(name: str) -> str:
    return quote(name, safe="")


def html_page(ctx: Context, title: str, body: object, section: str, status: int = 200) -> Page:
    return Page(status, layout(title, body, section=section, cluster=ctx.cluster))


def redirect(location: str) -> Page:
    return Page(303, "", headers={"Location": location})


def integer(query: dict[str, str], name: str, default: int | None = None,
            low: int | None = None, high: int | None = None) -> int | None:
    """``query[name]`` as an int in [low, high]; absent or empty: ``default``."""
    raw = query.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(f"{name} must be a whole number, not '{raw}'") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise BadInput(f"{name} must be {bounds}, not {value}")
    return value


def timestamp(raw: str) -> int | None:
    """Epoch milliseconds, or an ISO 8601 date-time (UTC when it names no zone)."""
    raw = raw.strip()
    if not raw:
        return None
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    try:
        dt = datetime.fromisoformat(raw)
    except ValueError:
        raise BadInput(f"timestamp must be epoch milliseconds or an ISO 8601 date-time "
                       f"(2026-01-31T12:00:00), not '{raw}'") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def error_page(ctx: Any, status: int, title: str, message: str) -> Page:
    body = tag("p", message, class_="error")
    cluster = ctx.cluster if ctx is not None else ""
    return Page(status, layout(title, body, cluster=cluster))


def throughput_block(ctx: Context, topic: str | None) -> Markup:
    url = "/charts/throughput" + (f"?topic={quote_name(topic)}" if topic else "")
    return tag("div", throughput_svg(ctx, topic), data_refresh=url,
               data_every=ctx.refresh_ms, id="throughput")


def throughput_svg(ctx: Context, topic: str | None) -> Markup:
    return line_chart(ctx.sampler.throughput(topic), title="records/s", unit="records/s")


def lag_svg(ctx: Context, gid: str | None) -> Markup:
    """One group's total lag, or every sampled group's (``gid`` None)."""
    series = ctx.sampler.lags() if gid is None else {gid: ctx.sampler.lag(gid)}
    return line_chart(series, title="total lag (messages)", unit="messages")
