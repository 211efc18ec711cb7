"""HTML for the console's pages: escaping, the layout, tables, forms, inline SVG charts.

Everything a page shows goes through :func:`e` (``html.escape``) unless it is a
:class:`Markup` (HTML this module or a page built from escaped parts). No external
asset: the CSS and the few lines of JavaScript are inline, so the console works
offline and behind any proxy.

Charts (:func:`line_chart`) are SVG drawn on the server: one ``polyline`` per series
(``class="series"``, ``data-series`` its name, ``data-last`` its last value,
``data-max`` its largest, ``data-points`` how many), a dot on the last point, the y
axis from 0 to a round number above the largest value, the time axis labelled with
the first and last sample's local time. An element with ``data-refresh="<url>"`` has
its content replaced every ``refresh_ms`` by what that URL answers (a chart route),
so a chart stays live without reloading the page or losing a half-filled form.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Iterable, Sequence

from spool.console.sampler import Point


class Markup(str):
    """A string already safe to put in HTML."""


def e(value: object) -> Markup:
    """``value`` escaped for HTML (Markup passes through)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    return Markup(sep.join(e(p) for p in parts))


def tag(name: str, content: object = "", **attrs: object) -> Markup:
    """``<name attrs>content</name>``; attribute names ``class_``/``for_`` lose the ``_``,
    ``data_x`` becomes ``data-x``; ``None``/``False`` attributes are left out."""
    out = []
    for k, v in attrs.items():
        if v is None or v is False:
            continue
        k = k.rstrip("_").replace("_", "-")
        out.append(f" {k}" if v is True else f' {k}="{e(v)}"')
    return Markup(f"<{name}{''.join(out)}>{e(content)}</{name}>")


def link(href: str, text: object, **attrs: object) -> Markup:
    return tag("a", text, href=href, **attrs)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], **attrs: object) -> Markup:
    head = join(tag("th", h) for h in headers)
    body = join(tag("tr", join(tag("td", c) for c in row)) for row in rows)
    return tag("table", Markup(f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"),
               **attrs)


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2b45;color:#fff;padding:.6em 1.5em;display:flex;gap:1.5em;align-items:center}
header a{color:#cfe0ff;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff}header .cluster{margin-left:auto;color:#9fb3d1}
main{padding:1em 1.5em;max-width:1200px}
h1{font-size:1.4em;margin:.3em 0 .6em}h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;background:#fff;margin:.3em 0}
th,td{border:1px solid #d8dce3;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f5}td.num,th.num{text-align:right}
pre{margin:0;white-space:pre-wrap;word-break:break-all;max-width:60em}
td .header{display:block}
.tag{font-size:.8em;background:#e3e8f0;border-radius:3px;padding:0 .35em}
.error{background:#fde8e8;border:1px solid #e4a3a3;padding:.8em 1em;border-radius:4px}
.note{background:#e8f4ea;border:1px solid #a6d2ae;padding:.5em 1em;border-radius:4px}
.muted{color:#6b7385}form.inline{display:flex;gap:.6em;align-items:end;flex-wrap:wrap}
form.inline label{display:flex;flex-direction:column;font-size:.85em}
.danger{background:#b42318;color:#fff;border:0;padding:.35em .9em;border-radius:3px}
figure.chart{margin:.5em 0;background:#fff;border:1px solid #d8dce3;display:inline-block;
padding:.4em}
figure.chart figcaption{font-size:.85em}.swatch{display:inline-block;width:.8em;height:.8em;
margin:0 .3em 0 .8em}
"""

_JS = """
document.querySelectorAll('[data-refresh]').forEach(function (el) {
  setInterval(function () {
    fetch(el.dataset.refresh).then(function (r) { return r.ok ? r.text() : null; })
      .then(function (t) { if (t !== null) { el.innerHTML = t; } })
      .catch(function () {});
  }, Number(el.dataset.every || 5000));
});
"""

NAV = (("/", "Overview"), ("/topics", "Topics"), ("/groups", "Groups"))


def layout(title: str, body: object, *, section: str = "", cluster: str = "") -> Markup:
    nav = join(link(href, text, class_="on" if href == section else None)
               for href, text in NAV)
    return Markup(
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{e(title)} · Spool console</title>"
        '<meta name=viewport content="width=device-width">'
        f"<style>{_CSS}</style></head><body>"
        f"<header><span class=brand>Spool console</span>{nav}"
        f"<span class=cluster>{e(cluster)}</span></header>"
        f"<main><h1>{e(title)}</h1>{e(body)}</main><script>{_JS}</script></body></html>")


def number(n: float | None) -> str:
    if n is None:
        return "-"
    if float(n).is_integer():
        return f"{int(n):,}"
    return f"{n:,.1f}"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d} UTC"


# ---- record bodies

FORMATS = ("text", "json", "hex")
MAX_SHOWN = 16384  # bytes of one key, value or header shown; longer ones are cut


def show_bytes(data: bytes | None, fmt: str, tell: bool = True, inline: bool = False) -> Markup:
    """A key, value or header value as text, pretty JSON or hex. Bytes that are not
    UTF-8 are shown as hex, and not-JSON as text, tagged so unless ``tell`` is False;
    ``inline``: text in a ``code`` span (headers), not a ``pre`` block. Only the first
    ``MAX_SHOWN`` bytes are shown, saying so (cut before a UTF-8 character, not in it)."""
    if data is None:
        return Markup("<em class=muted>null</em>")
    if len(data) > MAX_SHOWN:
        piece = data[:MAX_SHOWN]
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data":  # cut inside a character: before it
                piece = piece[:e.start]
        return join([tag("span", f"{len(data):,} bytes, the first {len(piece):,} shown",
                         class_="tag"), _cut(piece, fmt, tell, inline)])
    return _cut(data, fmt, tell, inline)


def _cut(data: bytes, fmt: str, tell: bool, inline: bool) -> Markup:
    if fmt == "hex":
        lines = [data[i:i + 16].hex(" ") for i in range(0, len(data), 16)]
        return tag("code" if inline else "pre", "\n".join(lines), class_="hex")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return join([tag("span", "not UTF-8, shown as hex", class_="tag") if tell else "",
                     show_bytes(data, "hex", inline=inline)])
    if fmt == "json":
        try:
            return tag("pre", json.dumps(json.loads(text), indent=2, ensure_ascii=False),
                       class_="json")
        except ValueError:
            return join([tag("span", "not JSON", class_="tag") if tell else "",
                         tag("code" if inline else "pre", text)])
    return tag("code" if inline else "pre", text)


# ---- charts

_COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777",
            "#4b5563")


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    scale = 10 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 2, 2.5, 5, 10) if m * scale >= value)


def line_chart(series: dict[str, list[Point]], *, title: str, unit: str,
               width: int = 640, height: int = 180) -> Markup:
    """An SVG line chart of ``series`` (name -> points) in a ``figure`` (module doc)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return Markup(f'<figure class="chart empty"><figcaption>{e(title)}: no samples yet'
                      "</figcaption></figure>")
    left, right, top, bottom = 56, 10, 10, 22
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    span = (t1 - t0) or 1.0
    ymax = nice_ceiling(max(p[1] for p in points))
    w, h = width - left - right, height - top - bottom

    def xy(p: Point) -> tuple[float, float]:
        x = left + (p[0] - t0) / span * w if t1 > t0 else left + w
        return round(x, 1), round(top + h - p[1] / ymax * h, 1)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{e(title)}">']
    for frac in (0.0, 0.5, 1.0):
        y = round(top + h - frac * h, 1)
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y}" y2="{y}" stroke="#e2e6ec"/>'
                     f'<text x="{left - 4}" y="{y + 4}" font-size="11" text-anchor="end" '
                     f'fill="#6b7385">{e(number(ymax * frac))}</text>')
    stamp = [time.strftime("%H:%M:%S", time.localtime(t)) for t in (t0, t1)]
    parts.append(f'<text x="{left}" y="{height - 6}" font-size="11" fill="#6b7385">'
                 f'{stamp[0]}</text><text x="{left + w}" y="{height - 6}" font-size="11" '
                 f'text-anchor="end" fill="#6b7385">{stamp[1]}</text>')
    legend = []
    for i, (name, pts) in enumerate(sorted(series.items())):
        if not pts:
            continue
        colour = _COLOURS[i % len(_COLOURS)]
        coords = " ".join(f"{x},{y}" for x, y in map(xy, pts))
        last = pts[-1][1]
        peak = max(p[1] for p in pts)
        parts.append(f'<polyline class="series" data-series="{e(name)}" '
                     f'data-last="{e(number(last))}" data-max="{e(number(peak))}" '
                     f'data-points="{len(pts)}" fill="none" '
                     f'stroke="{colour}" stroke-width="2" points="{coords}"/>')
        x, y = xy(pts[-1])
        parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>')
        legend.append(f'<span class="swatch" style="background:{colour}"></span>'
                      f"{e(name)}: {e(number(last))} {e(unit)}")
    parts.append("</svg>")
    return Markup(f'<figure class="chart">{"".join(parts)}<figcaption>{e(title)}'
                  f'{"".join(legend)}</figcaption></figure>')
