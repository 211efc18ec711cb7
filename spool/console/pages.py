"""The console's pages: one function per route, each answering a :class:`Page`.

Routes (``ROUTES``; path parameters are percent-decoded names)::

    GET  /                               cluster overview: brokers, racks, controller,
                                         partitions led and held per broker, throughput
                                         and lag charts
    GET  /topics                         every topic (internal ones tagged), create form
    POST /topics                         create (name, partitions, replication_factor)
    GET  /topics/<name>                  partitions (leader, replicas, ISR, offsets,
                                         size), throughput chart, configs
    GET  /topics/<name>/messages         the message browser: ?partition=&offset= or
                                         &timestamp= (epoch ms or ISO 8601, UTC if no
                                         zone), &limit= (1-500), &format=text|json|hex
    GET  /topics/<name>/delete           the confirmation form (type the name)
    POST /topics/<name>/delete           delete when ``confirm`` equals the name
    GET  /groups                         every consumer group: type, state, members, lag
    GET  /groups/<id>                    members, lag per partition, lag-over-time chart
    GET  /charts/throughput[?topic=]     the throughput chart alone (for live refresh)
    GET  /charts/lag[/<id>]              the lag chart alone (every group, or one)

A read-only console (``--read-only``) shows no create or delete form and answers
403 on those routes. Bad input is a page, never a crash: an unknown topic, partition or group is a 404,
a malformed or out-of-range parameter a 400 naming it (``BadInput``); the cluster
not answering is a 503 (see ``spool.console.server``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from spool.console.cluster import BadInput, ClusterReader, ConfigEntry
from spool.console.render import (
    FORMATS,
    Markup,
    e,
    join,
    layout,
    line_chart,
    link,
    number,
    show_bytes,
    size,
    table,
    tag,
    when,
)
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


def _q(name: str) -> str:
    return quote(name, safe="")


def _html(ctx: Context, title: str, body: object, section: str, status: int = 200) -> Page:
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


# ---- overview


def overview(ctx: Context, req: Request) -> Page:
    ov = ctx.reader.overview()
    brokers = table(
        ["Broker", "Host", "Rack", "Role", "Partitions led", "Replicas held"],
        [[n.id, f"{n.host}:{n.port}", n.rack or "-",
          "controller" if n.id == ov.controller_id else "", n.leaders, n.replicas]
         for n in ov.nodes], id="brokers")
    facts = table(["Cluster id", "Controller", "Brokers", "Topics", "Partitions", "Groups"],
                  [[ov.cluster_id, ov.controller_id if ov.controller_id is not None else "-",
                    len(ov.nodes), ov.topics, ov.partitions, ov.groups]], id="facts")
    lag = tag("div", _lag_chart(ctx, None), data_refresh="/charts/lag",
              data_every=ctx.refresh_ms, id="lag-chart")
    body = join([facts, tag("h2", "Brokers"), brokers,
                 tag("h2", "Throughput (records/s per topic)"), _throughput_block(ctx, None),
                 tag("h2", "Consumer lag (messages per group)"), lag])
    return _html(ctx, "Cluster overview", body, "/")


def _throughput_block(ctx: Context, topic: str | None) -> Markup:
    url = "/charts/throughput" + (f"?topic={_q(topic)}" if topic else "")
    return tag("div", _throughput_chart(ctx, topic), data_refresh=url,
               data_every=ctx.refresh_ms, id="throughput")


def _throughput_chart(ctx: Context, topic: str | None) -> Markup:
    return line_chart(ctx.sampler.throughput(topic), title="records/s", unit="records/s")


# ---- topics


_CREATE_FORM = Markup(
    '<form class=inline method=post action="/topics" id="create-topic">'
    '<label>Name<input name=name required></label>'
    '<label>Partitions<input name=partitions type=number min=1 value=1></label>'
    '<label>Replication factor<input name=replication_factor type=number min=1 '
    'placeholder="broker default"></label>'
    '<button type=submit>Create topic</button></form>')


def topics(ctx: Context, req: Request, message: Markup | None = None,
           status: int = 200) -> Page:
    rates = {t: s[-1][1] for t, s in ctx.sampler.throughput().items() if s}
    listed = ctx.reader.topics()
    rows = [[join([link(f"/topics/{_q(t.name)}", t.name),
                   Markup(" ") + tag("span", "internal", class_="tag") if t.internal else ""]),
             t.partitions, t.replication_factor, number(t.records), number(rates.get(t.name))]
            for t in sorted(listed, key=lambda t: (t.internal, t.name))]
    deleted = req.query.get("deleted")
    notes = [tag("p", f"Topic '{deleted}' deleted.", class_="note")] if deleted else []
    if message is not None:
        notes.append(message)
    form = "" if ctx.read_only else _CREATE_FORM
    body = join([*notes, form, tag("h2", f"Topics ({len(listed)})"),
                 table(["Topic", "Partitions", "Replication factor", "Records",
                        "Records/s (last sample)"], rows, id="topics")])
    return _html(ctx, "Topics", body, "/topics", status)


def create_topic(ctx: Context, req: Request) -> Page:
    name = req.query.get("name", "").strip()
    try:
        if not name:
            raise BadInput("a topic needs a name")
        partitions = integer(req.query, "partitions", 1, 1, 100000)
        rf = integer(req.query, "replication_factor", -1, 1, 32767)
        ctx.reader.create_topic(name, partitions or 1, rf if rf is not None else -1)
    except BadInput as err:
        return topics(ctx, req, tag("p", str(err), class_="error"), 400)
    return redirect(f"/topics/{_q(name)}")


def topic(ctx: Context, req: Request) -> Page:
    name = req.params["name"]
    t = ctx.reader.topic(name)
    parts = table(
        ["Partition", "Leader", "Replicas", "ISR", "Log start offset", "High watermark",
         "Records", "Size"],
        [[link(f"/topics/{_q(name)}/messages?partition={p.id}", p.id),
          p.leader if p.leader is not None else "none", join(p.replicas, ","),
          join(p.isr, ","), p.log_start_offset, p.high_watermark,
          number(p.high_watermark - p.log_start_offset), size(p.size_bytes)]
         for p in t.partitions], id="partitions")
    overridden = [c for c in t.configs if not c.is_default]
    defaults = [c for c in t.configs if c.is_default]

    def config_rows(entries: list[ConfigEntry]) -> list[list[object]]:
        return [[c.name, "(hidden)" if c.sensitive else (c.value or ""), c.source]
                for c in entries]

    configs = join([
        table(["Config", "Value", "Source"], config_rows(overridden), id="configs")
        if overridden else tag("p", "None: every config has its default.", class_="muted"),
        tag("details", join([tag("summary", f"{len(defaults)} configs at their defaults"),
                             table(["Config", "Value", "Source"], config_rows(defaults),
                                   id="default-configs")]))])
    actions = link(f"/topics/{_q(name)}/messages", "Browse messages")
    if not ctx.read_only:
        actions = join([actions, Markup(" · "), link(f"/topics/{_q(name)}/delete",
                                                     "Delete topic…")])
    body = join([tag("p", join([tag("span", "internal", class_="tag") + Markup(" ")
                                if t.internal else "", actions])),
                 tag("h2", f"Partitions ({len(t.partitions)})"), parts,
                 tag("h2", "Throughput (records/s)"), _throughput_block(ctx, name),
                 tag("h2", f"Configs set on the topic ({len(overridden)})"), configs])
    return _html(ctx, f"Topic {name}", body, "/topics")


def messages(ctx: Context, req: Request) -> Page:
    name, q = req.params["name"], req.query
    partition = integer(q, "partition", 0, 0)
    offset = integer(q, "offset", None, 0)
    ts = timestamp(q.get("timestamp", ""))
    limit = integer(q, "limit", 20, 1, 500)
    fmt = q.get("format", "text") or "text"
    if fmt not in FORMATS:
        raise BadInput(f"format must be one of {', '.join(FORMATS)}, not '{fmt}'")
    assert partition is not None and limit is not None
    b = ctx.reader.browse(name, partition, offset, ts, limit)
    form = Markup(
        '<form class=inline method=get id="browse">'
        '<label>Partition<select name=partition>'
        + "".join(f'<option{" selected" if p == partition else ""}>{p}</option>'
                  for p in range(b.partitions))
        + f'</select></label><label>Offset<input name=offset type=number min=0 '
        f'value="{e(q.get("offset", ""))}"></label>'
        f'<label>or timestamp (ms or ISO, UTC)<input name=timestamp '
        f'value="{e(q.get("timestamp", ""))}"></label>'
        f'<label>Limit<input name=limit type=number min=1 max=500 value="{limit}"></label>'
        f'<label>Show as<select name=format>'
        + "".join(f'<option{" selected" if f == fmt else ""}>{f}</option>' for f in FORMATS)
        + "</select></label><button type=submit>Show</button></form>")
    base = {"partition": partition, "limit": limit, "format": fmt}
    nav = []
    if b.start > b.log_start_offset:
        older = max(b.log_start_offset, b.start - limit)
        nav.append(link("?" + urlencode({**base, "offset": older}), "← older"))
    if b.messages and b.messages[-1].offset + 1 < b.high_watermark:
        nav.append(link("?" + urlencode({**base, "offset": b.messages[-1].offset + 1}),
                        "newer →"))
    summary = tag("p", f"Partition {partition}: offsets {b.log_start_offset} to "
                       f"{b.high_watermark - 1} (high watermark {b.high_watermark}); "
                       f"{len(b.messages)} messages from offset {b.start}. ",
                  class_="muted")
    rows = [[m.offset, when(m.timestamp_ms) + (f" ({m.timestamp_type})"
                                               if m.timestamp_type else ""),
             show_bytes(m.key, fmt, False), show_bytes(m.value, fmt),
             join([tag("span", join([tag("b", k), Markup(": "),
                                     show_bytes(v, fmt, False, inline=True)]),
                       class_="header") for k, v in m.headers])]
            for m in b.messages]
    listing = (table(["Offset", "Timestamp", "Key", "Value", "Headers"], rows, id="messages")
               if rows else tag("p", "No messages in this range.", class_="note"))
    body = join([tag("p", link(f"/topics/{_q(name)}", f"← topic {name}")), form, summary,
                 listing, tag("p", join(nav, " · "))])
    return _html(ctx, f"Messages of {name}", body, "/topics")


def delete_form(ctx: Context, req: Request, error: str | None = None,
                status: int = 200) -> Page:
    name = req.params["name"]
    ctx.reader.topic(name)  # a 404 for an unknown topic
    body = join([
        tag("p", error, class_="error") if error else "",
        tag("p", f"Deleting topic '{name}' removes all its messages. It cannot be undone. "
                 "Type the topic's name to confirm."),
        Markup(f'<form method=post action="/topics/{e(_q(name))}/delete" id="delete-topic">'
               '<input name=confirm autocomplete=off required> '
               '<button type=submit class=danger>Delete</button></form>'),
        tag("p", link(f"/topics/{_q(name)}", "Cancel"))])
    return _html(ctx, f"Delete topic {name}?", body, "/topics", status)


def delete_topic(ctx: Context, req: Request) -> Page:
    name = req.params["name"]
    if req.query.get("confirm", "") != name:
        return delete_form(ctx, req, "The name typed does not match: nothing was deleted.",
                           400)
    ctx.reader.delete_topic(name)
    return redirect(f"/topics?deleted={_q(name)}")


# ---- groups


def groups(ctx: Context, req: Request) -> Page:
    listed = ctx.reader.groups()
    rows = []
    for g in listed:
        lag = ctx.sampler.lag(g.group_id)
        rows.append([link(f"/groups/{_q(g.group_id)}", g.group_id), g.type, g.state,
                     g.members, number(lag[-1][1]) if lag else "-"])
    body = join([tag("h2", f"Groups ({len(listed)})"),
                 table(["Group", "Type", "State", "Members", "Lag (last sample)"], rows,
                       id="groups")])
    return _html(ctx, "Consumer groups", body, "/groups")


def group(ctx: Context, req: Request) -> Page:
    gid = req.params["id"]
    g = ctx.reader.group(gid)
    ctx.sampler.record_lag(gid, g.total_lag)
    facts = table(["State", "Type", "Assignor", "Coordinator", "Members", "Total lag"],
                  [[g.state, g.type, g.protocol or "-",
                    g.coordinator if g.coordinator is not None else "-", len(g.members),
                    number(g.total_lag)]], id="group")
    members = table(["Member", "Client id", "Host", "Instance id", "Assigned partitions"],
                    [[m.member_id, m.client_id, m.host, m.instance_id or "-",
                      join((f"{t}-{p}" for t, p in m.assignment), ", ")]
                     for m in g.members], id="members")
    lag = table(["Topic", "Partition", "Committed offset", "High watermark", "Lag", "Member"],
                [[link(f"/topics/{_q(r.topic)}", r.topic), r.partition,
                  r.committed if r.committed is not None else "-",
                  r.high_watermark if r.high_watermark is not None else "deleted",
                  number(r.lag), r.member_id or "-"] for r in g.lag], id="lag")
    chart = tag("div", _lag_chart(ctx, gid), data_refresh=f"/charts/lag/{_q(gid)}",
                data_every=ctx.refresh_ms, id="lag-chart")
    body = join([facts, tag("h2", "Lag over time"), chart,
                 tag("h2", "Lag per partition"), lag, tag("h2", f"Members ({len(g.members)})"),
                 members])
    return _html(ctx, f"Group {gid}", body, "/groups")


def _lag_chart(ctx: Context, gid: str | None) -> Markup:
    """One group's total lag, or every sampled group's (``gid`` None)."""
    series = ctx.sampler.lags() if gid is None else {gid: ctx.sampler.lag(gid)}
    return line_chart(series, title="total lag (messages)", unit="messages")


def throughput_chart(ctx: Context, req: Request) -> Page:
    return Page(200, _throughput_chart(ctx, req.query.get("topic") or None))


def lag_chart(ctx: Context, req: Request) -> Page:
    return Page(200, _lag_chart(ctx, req.params.get("id")))


Handler = Callable[[Context, Request], Page]

MUTATING = {"create_topic", "delete_form", "delete_topic"}  # refused when read-only

ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    (m, re.compile(p), h) for m, p, h in [
        ("GET", r"/", overview),
        ("GET", r"/topics", topics),
        ("POST", r"/topics", create_topic),
        ("GET", r"/topics/(?P<name>[^/]+)", topic),
        ("GET", r"/topics/(?P<name>[^/]+)/messages", messages),
        ("GET", r"/topics/(?P<name>[^/]+)/delete", delete_form),
        ("POST", r"/topics/(?P<name>[^/]+)/delete", delete_topic),
        ("GET", r"/groups", groups),
        ("GET", r"/groups/(?P<id>[^/]+)", group),
        ("GET", r"/charts/throughput", throughput_chart),
        ("GET", r"/charts/lag", lag_chart),
        ("GET", r"/charts/lag/(?P<id>[^/]+)", lag_chart),
    ]
]


def route(method: str, path: str) -> tuple[Handler | None, dict[str, str], bool]:
    """The handler for ``method`` and ``path``, its path parameters (raw), and whether
    the path exists for another method (a 405 then)."""
    other = False
    for m, pattern, handler in ROUTES:
        match = pattern.fullmatch(path)
        if match:
            if m == method:
                return handler, match.groupdict(), False
            other = True
    return None, {}, other


def error_page(ctx: Any, status: int, title: str, message: str) -> Page:
    body = tag("p", message, class_="error")
    cluster = ctx.cluster if ctx is not None else ""
    return Page(status, layout(title, body, cluster=cluster))
