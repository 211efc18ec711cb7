"""The topic pages: the list with its create form, one topic (partitions, sizes,
configs, throughput), the message browser, and deletion behind a typed confirmation.
Routes and their parameters: ``spool.console.pages``."""

from __future__ import annotations

from urllib.parse import urlencode

from spool.console.model import BadInput, ConfigEntry
from spool.console.render import (
    FORMATS,
    Markup,
    e,
    join,
    link,
    number,
    show_bytes,
    size,
    table,
    tag,
    when,
)
from spool.console.web import (
    Context,
    Page,
    Request,
    html_page,
    integer,
    quote_name,
    redirect,
    throughput_block,
    timestamp,
)

RECORDS = tag("abbr", "Records", title="high watermark - log start offset: compacted-away "
              "records and transaction markers count too")

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
    rows = [[join([link(f"/topics/{quote_name(t.name)}", t.name),
                   Markup(" ") + tag("span", "internal", class_="tag") if t.internal else ""]),
             t.partitions, t.replication_factor, number(t.records), number(rates.get(t.name))]
            for t in sorted(listed, key=lambda t: (t.internal, t.name))]
    deleted = req.query.get("deleted")
    notes = [tag("p", f"Topic '{deleted}' deleted.", class_="note")] if deleted else []
    if message is not None:
        notes.append(message)
    form = "" if ctx.read_only else _CREATE_FORM
    body = join([*notes, form, tag("h2", f"Topics ({len(listed)})"),
                 table(["Topic", "Partitions", "Replication factor", RECORDS,
                        "Records/s (last sample)"], rows, id="topics")])
    return html_page(ctx, "Topics", body, "/topics", status)


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
    return redirect(f"/topics/{quote_name(name)}")


def topic(ctx: Context, req: Request) -> Page:
    name = req.params["name"]
    t = ctx.reader.topic(name)
    parts = table(
        ["Partition", "Leader", "Replicas", "ISR", "Log start offset", "High watermark",
         RECORDS, "Size"],
        [[link(f"/topics/{quote_name(name)}/messages?partition={p.id}", p.id),
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
    actions = link(f"/topics/{quote_name(name)}/messages", "Browse messages")
    if not ctx.read_only:
        actions = join([actions, Markup(" · "), link(f"/topics/{quote_name(name)}/delete",
                                                     "Delete topic…")])
    body = join([tag("p", join([tag("span", "internal", class_="tag") + Markup(" ")
                                if t.internal else "", actions])),
                 tag("h2", f"Partitions ({len(t.partitions)})"), parts,
                 tag("h2", "Throughput (records/s)"), throughput_block(ctx, name),
                 tag("h2", f"Configs set on the topic ({len(overridden)})"), configs])
    return html_page(ctx, f"Topic {name}", body, "/topics")


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
    if b.high_watermark > b.log_start_offset:
        held = (f"Partition {partition}: offsets {b.log_start_offset} to "
                f"{b.high_watermark - 1} (high watermark {b.high_watermark}); "
                f"{len(b.messages)} messages from offset {b.start}.")
    else:
        held = f"Partition {partition} is empty (high watermark {b.high_watermark})."
    summary = tag("p", held, class_="muted")
    rows = [[m.offset, when(m.timestamp_ms) + (f" ({m.timestamp_type})"
                                               if m.timestamp_type else ""),
             show_bytes(m.key, fmt, False), show_bytes(m.value, fmt),
             join([tag("span", join([tag("b", k), Markup(": "),
                                     show_bytes(v, fmt, False, inline=True)]),
                       class_="header") for k, v in m.headers])]
            for m in b.messages]
    listing = (table(["Offset", "Timestamp", "Key", "Value", "Headers"], rows, id="messages")
               if rows else tag("p", "No messages in this range.", class_="note"))
    back = tag("p", link(f"/topics/{quote_name(name)}", f"← topic {name}"))
    body = join([back, form, summary, listing, tag("p", join(nav, " · "))])
    return html_page(ctx, f"Messages of {name}", body, "/topics")


def delete_form(ctx: Context, req: Request, error: str | None = None,
                status: int = 200) -> Page:
    name = req.params["name"]
    ctx.reader.topic(name)  # a 404 for an unknown topic
    body = join([
        tag("p", error, class_="error") if error else "",
        tag("p", f"Deleting topic '{name}' removes all its messages. It cannot be undone. "
                 "Type the topic's name to confirm."),
        Markup(f'<form method=post action="/topics/{e(quote_name(name))}/delete" '
               'id="delete-topic"><input name=confirm autocomplete=off required> '
               '<button type=submit class=danger>Delete</button></form>'),
        tag("p", link(f"/topics/{quote_name(name)}", "Cancel"))])
    return html_page(ctx, f"Delete topic {name}?", body, "/topics", status)


def delete_topic(ctx: Context, req: Request) -> Page:
    name = req.params["name"]
    if req.query.get("confirm", "") != name:
        return delete_form(ctx, req, "The name typed does not match: nothing was deleted.",
                           400)
    ctx.reader.delete_topic(name)
    return redirect(f"/topics?deleted={quote_name(name)}")
