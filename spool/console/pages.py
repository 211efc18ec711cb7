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
403 on those routes. Bad input is a page, never a crash: an unknown topic, partition
or group is a 404, a malformed or out-of-range parameter a 400 naming it
(``BadInput``); the cluster not answering is a 503 (see ``spool.console.server``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spool.console.render import join, link, number, table, tag
from spool.console.topic_pages import (
    create_topic,
    delete_form,
    delete_topic,
    messages,
    topic,
    topics,
)
from spool.console.web import (
    Context,
    Page,
    Request,
    html_page,
    lag_svg,
    quote_name,
    throughput_block,
    throughput_svg,
)


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
    lag = tag("div", lag_svg(ctx, None), data_refresh="/charts/lag",
              data_every=ctx.refresh_ms, id="lag-chart")
    body = join([facts, tag("h2", "Brokers"), brokers,
                 tag("h2", "Throughput (records/s per topic)"), throughput_block(ctx, None),
                 tag("h2", "Consumer lag (messages per group)"), lag])
    return html_page(ctx, "Cluster overview", body, "/")


def groups(ctx: Context, req: Request) -> Page:
    listed = ctx.reader.groups()
    rows = []
    for g in listed:
        lag = ctx.sampler.lag(g.group_id)
        rows.append([link(f"/groups/{quote_name(g.group_id)}", g.group_id), g.type, g.state,
                     g.members, number(lag[-1][1]) if lag else "-"])
    body = join([tag("h2", f"Groups ({len(listed)})"),
                 table(["Group", "Type", "State", "Members", "Lag (last sample)"], rows,
                       id="groups")])
    return html_page(ctx, "Consumer groups", body, "/groups")


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
                [[link(f"/topics/{quote_name(r.topic)}", r.topic), r.partition,
                  r.committed if r.committed is not None else "-",
                  r.high_watermark if r.high_watermark is not None else "deleted",
                  number(r.lag), r.member_id or "-"] for r in g.lag], id="lag")
    chart = tag("div", lag_svg(ctx, gid), data_refresh=f"/charts/lag/{quote_name(gid)}",
                data_every=ctx.refresh_ms, id="lag-chart")
    body = join([facts, tag("h2", "Lag over time"), chart,
                 tag("h2", "Lag per partition"), lag, tag("h2", f"Members ({len(g.members)})"),
                 members])
    return html_page(ctx, f"Group {gid}", body, "/groups")


def throughput_chart(ctx: Context, req: Request) -> Page:
    return Page(200, throughput_svg(ctx, req.query.get("topic") or None))


def lag_chart(ctx: Context, req: Request) -> Page:
    return Page(200, lag_svg(ctx, req.params.get("id")))


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
