"""The console's pure parts: listener addresses, routing, escaping, value display, chart
scales, sizes in binary units, and the sampler's arithmetic (records/s, total lag) over a
scripted reader."""

from __future__ import annotations

import re
import socket

import pytest

from spool.broker.config import BrokerConfig, ConfigError
from spool.console import pages
from spool.console.render import layout, line_chart, nice_ceiling, show_bytes, size
from spool.console.sampler import Sampler
from spool.util.listen import parse_http_listener


@pytest.mark.parametrize(("text", "address"), [
    ("http://127.0.0.1:8080", ("127.0.0.1", 8080)),
    ("http://:0", ("0.0.0.0", 0)),
    ("http://[::1]:9000/", ("::1", 9000)),
])
def test_listener_addresses(text, address):
    assert parse_http_listener(text) == address


@pytest.mark.parametrize(("text", "says"), [
    ("https://127.0.0.1:8080", "is not http://host:port (only http is served)"),
    ("http://127.0.0.1", "names no port"),
    ("http://127.0.0.1:99999", "has no valid port"),
    ("http://127.0.0.1:8080/console", "has a path"),
    ("http://a:1,http://b:2", "one listener only"),
])
def test_bad_listener_addresses_say_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_http_listener(text)


def test_the_broker_refuses_a_bad_console_listener_by_name():
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(None, ["console.listeners=https://127.0.0.1:8080"])
    assert "console.listeners" in str(e.value)
    assert "http://host:port" in str(e.value)
    assert BrokerConfig.load(None, []).get("console.listeners") is None


def test_routes_decode_names_and_tell_405_from_404():
    handler, params, _ = pages.route("GET", "/groups/team%2Fbilling")
    assert handler is pages.group and params == {"id": "team%2Fbilling"}
    assert pages.route("POST", "/topics/t/delete")[0] is pages.delete_topic
    assert pages.route("DELETE", "/topics")[:1] == (None,) and pages.route("DELETE", "/topics")[2]
    assert pages.route("GET", "/nowhere") == (None, {}, False)


def test_names_are_escaped_everywhere():
    html = layout("Group <script>alert(1)</script>", line_chart(
        {'"><img src=x>': [(0.0, 1.0), (1.0, 2.0)]}, title="t", unit="u"))
    assert "<script>alert(1)" not in html and "<img src=x>" not in html
    assert "Group &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_values_as_text_json_and_hex():
    assert show_bytes(b'{"a": [1]}', "json") == '<pre class="json">{\n  &quot;a&quot;: [\n' \
        '    1\n  ]\n}</pre>'
    assert show_bytes(b"plain", "json") == '<span class="tag">not JSON</span><pre>plain</pre>'
    assert show_bytes(b"\xff\x00", "text") == \
        '<span class="tag">not UTF-8, shown as hex</span><pre class="hex">ff 00</pre>'
    assert show_bytes(bytes(range(17)), "hex").count("\n") == 1  # 16 bytes a line
    assert show_bytes(None, "text") == "<em class=muted>null</em>"
    big = "a" * 16383 + "é" + "b" * 100  # é's two bytes straddle the 16 KiB cut
    assert show_bytes(big.encode(), "text") == (
        '<span class="tag">16,485 bytes, the first 16,383 shown</span>'
        f"<pre>{'a' * 16383}</pre>")


@pytest.mark.parametrize(("n", "shown"), [
    (None, "-"), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (5 * 1024**2 + 512 * 1024, "5.5 MiB"), (3 * 1024**4, "3072.0 GiB")])
def test_sizes_in_binary_units(n, shown):
    assert size(n) == shown


@pytest.mark.parametrize(("value", "ceiling"), [
    (0, 1), (0.3, 0.5), (1, 1), (7, 10), (181.9, 200), (2030, 2500), (12615, 20000)])
def test_chart_scales_end_at_a_round_number(value, ceiling):
    assert nice_ceiling(value) == pytest.approx(ceiling)


class ScriptedReader:
    """A cluster whose high watermarks and committed offsets the test sets."""

    def __init__(self) -> None:
        self.high = {("orders", 0): 10, ("orders", 1): 0, ("clicks", 0): 5}
        self.committed_offsets = {"billing": {("orders", 0): 4, ("orders", 1): 0}}

    def all_partitions(self):
        return {"orders": 2, "clicks": 1}

    def high_watermarks(self, tps):
        return {tp: self.high[tp] for tp in tps}

    def group_ids(self):
        return sorted(self.committed_offsets)

    def committed(self, group):
        return self.committed_offsets[group]


def test_the_sampler_turns_end_offsets_into_records_per_second_and_lag():
    reader, now = ScriptedReader(), [1000.0]
    sampler = Sampler(reader, clock=lambda: now[0])
    sampler.sample_once()
    assert sampler.throughput() == {}  # one sample: no rate yet
    assert sampler.lag("billing") == [(1000.0, 6)]
    reader.high[("orders", 0)] += 30
    reader.high[("orders", 1)] += 10
    reader.committed_offsets["billing"][("orders", 1)] = 10
    now[0] = 1004.0
    sampler.sample_once()
    assert sampler.throughput() == {"orders": [(1004.0, 10.0)], "clicks": [(1004.0, 0.0)]}
    assert sampler.throughput("clicks") == {"clicks": [(1004.0, 0.0)]}
    assert sampler.lag("billing") == [(1000.0, 6), (1004.0, 36)]
    sampler.record_lag("billing", 0)
    assert sampler.lags() == {"billing": [(1000.0, 6), (1004.0, 36), (1004.0, 0)]}


def test_a_commit_at_offset_0_lags_by_every_record():
    reader = ScriptedReader()
    reader.committed_offsets = {"audit": {("clicks", 0): 0}}
    sampler = Sampler(reader, clock=lambda: 1.0)
    sampler.sample_once()
    assert sampler.lags() == {"audit": [(1.0, 5)]}


def test_spool_console_refuses_a_taken_or_malformed_listener():
    from tests.helpers.cli import spool_cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        got = spool_cli("console", "-b", "127.0.0.1:1", "--listen", f"http://127.0.0.1:{port}")
    assert (got.returncode, got.stderr) == (
        1, f"spool: console: cannot listen on 127.0.0.1:{port}: Address already in use\n")
    got = spool_cli("console", "--listen", "https://127.0.0.1:8080")
    assert (got.returncode, got.stderr) == (
        2, "spool: --listen: 'https://127.0.0.1:8080' is not http://host:port "
           "(only http is served)\n")
