"""The web console in a real browser (Debian's Chromium through Playwright) against a
real broker serving it (``console.listeners``): what a user sees.

One broker and one browser for the module (``make test`` runs tests/console in one
process of its own, with tests/spark). Each test makes its own topics and groups and checks that the pages
show exactly them: the topics and their partitions, a message produced here (key,
value as text, JSON and hex, headers), a group's lag per partition and its lag chart,
topic creation and deletion through the forms, and error pages (404/400) for bad
input. Screenshots of every page go to ``test-artifacts/console/`` (not committed).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import sync_playwright

from tests.helpers.broker_proc import BrokerProcess

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "console"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("console") / "data",
                      {"console.listeners": "http://127.0.0.1:0"})
    b.start()
    b.console_url = b.http_urls["console"]  # the broker's stdout line
    yield b
    b.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, broker):
    context = browser.new_context(base_url=broker.console_url,
                                  viewport={"width": 1280, "height": 900})
    p = context.new_page()
    yield p
    context.close()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _create(admin, name: str, partitions: int, config: dict | None = None) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def _produce(broker, topic: str, records: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for r in records:
        producer.produce(topic, **r)
    assert producer.flush(30) == 0


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _follow(page, selector: str) -> None:
    """Click a link or a form's button and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(selector)


def _rows(page, table_id: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"#{table_id} tbody tr",
        "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")


def test_overview_shows_the_broker_and_the_controller(page, broker):
    response = page.goto("/")
    assert response.status == 200
    assert page.title() == "Cluster overview · Spool console"
    [row] = _rows(page, "brokers")
    assert row[:4] == ["0", f"127.0.0.1:{broker.port}", "-", "controller"]
    [facts] = _rows(page, "facts")
    assert facts[1:3] == ["0", "1"]  # controller 0, one broker
    _shot(page, "overview")


def test_topics_page_lists_the_topics_created_here(page, admin, broker):
    a, b = _name("orders"), _name("payments")
    _create(admin, a, 3)
    _create(admin, b, 1)
    _produce(broker, b, [{"value": f"p{i}".encode()} for i in range(5)])
    # records count from the log start: two trimmed away leave 3
    [trimmed] = admin.delete_records([TopicPartition(b, 0, 2)]).values()
    assert trimmed.result(30).low_watermark == 2
    page.goto("/topics")
    rows = {r[0]: r for r in _rows(page, "topics")}
    assert rows[a][1:4] == ["3", "1", "0"]  # partitions, replication factor, records
    assert rows[b][1:4] == ["1", "1", "3"]
    _shot(page, "topics")
    _follow(page, f"#topics a:text-is('{a}')")
    assert page.title() == f"Topic {a} · Spool console"
    assert [r[:6] for r in _rows(page, "partitions")] == [
        [str(p), "0", "0", "0", "0", "0"] for p in range(3)]


def test_topic_page_shows_partitions_sizes_and_configs(page, admin, broker):
    topic = _name("sized")
    _create(admin, topic, 2, {"retention.ms": "3600000"})
    _produce(broker, topic, [{"value": b"x" * 100, "partition": 1} for _ in range(3)])
    page.goto(f"/topics/{topic}")
    parts = _rows(page, "partitions")
    assert [r[4:7] for r in parts] == [["0", "0", "0"], ["0", "3", "3"]]
    assert parts[0][7] == "0 B"  # DescribeLogDirs: an empty log
    size = sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-1").glob("*.log"))
    assert 0 < size < 1024 and parts[1][7] == f"{size} B"  # the partition's segment bytes
    assert _rows(page, "configs") == [["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"]]
    page.click("summary")  # the defaults, folded
    defaults = {r[0]: r for r in _rows(page, "default-configs")}
    assert defaults["cleanup.policy"][1:] == ["delete", "DEFAULT_CONFIG"]
    assert "retention.ms" not in defaults
    _shot(page, "topic")


def test_message_browser_shows_the_message_produced_here(page, admin, broker):
    topic = _name("browse")
    _create(admin, topic, 2)
    _produce(broker, topic, [
        {"key": b"order-42", "value": b'{"id": 42, "item": "tea"}', "partition": 1,
         "headers": [("trace", b"abc-1")]},
        {"key": None, "value": b"\x00\xff\x10binary", "partition": 1},
    ])
    page.goto(f"/topics/{topic}")
    _follow(page, "#partitions a:text-is('1')")
    rows = _rows(page, "messages")
    assert rows[0][0] == "0"
    assert rows[0][2:] == ["order-42", '{"id": 42, "item": "tea"}', "trace: abc-1"]
    assert rows[1][2] == "null"
    assert rows[1][3] == "not UTF-8, shown as hex\n00 ff 10 62 69 6e 61 72 79"
    _shot(page, "messages")
    page.select_option("#browse select[name=format]", "json")
    page.fill("#browse input[name=offset]", "0")
    page.fill("#browse input[name=limit]", "1")
    _follow(page, "#browse button")
    [row] = _rows(page, "messages")
    assert row[3] == '{\n  "id": 42,\n  "item": "tea"\n}'
    page.select_option("#browse select[name=format]", "hex")
    _follow(page, "#browse button")
    [row] = _rows(page, "messages")
    assert row[2] == "6f 72 64 65 72 2d 34 32"  # order-42
    assert page.locator("text=newer →").count() == 1
    page.fill("#browse input[name=offset]", "")
    page.fill("#browse input[name=timestamp]", "2000-01-01T00:00:00")  # before both
    page.fill("#browse input[name=limit]", "20")
    page.select_option("#browse select[name=format]", "text")
    _follow(page, "#browse button")
    assert [r[0] for r in _rows(page, "messages")] == ["0", "1"]
    page.fill("#browse input[name=timestamp]", "2999-01-01T00:00:00")  # after both
    _follow(page, "#browse button")
    assert page.inner_text("p.note") == "No messages in this range."


def test_group_pages_show_lag_per_partition_and_the_lag_chart(page, admin, broker):
    topic, group = _name("lagging"), _name("billing")
    _create(admin, topic, 1)
    _produce(broker, topic, [{"value": f"m{i}".encode()} for i in range(10)])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "client.id": "billing-app", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
                consumer.commit(m, asynchronous=False)
        assert len(got) == 4
        page.goto("/groups")
        listed = {r[0]: r for r in _rows(page, "groups")}
        assert listed[group][1:4] == ["CLASSIC", "STABLE", "1"]
        _shot(page, "groups")
        _follow(page, f"#groups a:text-is('{group}')")
        assert page.title() == f"Group {group} · Spool console"
        assert _rows(page, "lag") == [[topic, "0", "4", "10", "6", _rows(page, "members")[0][0]]]
        assert _rows(page, "members")[0][1] == "billing-app"
        line = page.locator(f"#lag-chart polyline[data-series='{group}']")
        assert line.get_attribute("data-last") == "6"
        while len(got) < 10 and time.monotonic() < deadline:  # catch up
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
                consumer.commit(m, asynchronous=False)
        assert len(got) == 10
        page.reload()
        assert _rows(page, "lag")[0][2:5] == ["10", "10", "0"]
        line = page.locator(f"#lag-chart polyline[data-series='{group}']")
        assert line.get_attribute("data-last") == "0"
        assert int(line.get_attribute("data-points")) >= 2  # 6, then 0
        assert page.locator("#lag-chart svg").is_visible()
        _shot(page, "group")
    finally:
        consumer.close()


def test_create_and_delete_a_topic_through_the_forms(page, admin):
    topic = _name("made-here")
    page.goto("/topics")
    page.fill("#create-topic input[name=name]", topic)
    page.fill("#create-topic input[name=partitions]", "4")
    _follow(page, "#create-topic button")
    assert page.title() == f"Topic {topic} · Spool console"
    assert len(_rows(page, "partitions")) == 4
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    _follow(page, "text=Delete topic…")
    page.fill("#delete-topic input[name=confirm]", "not-the-name")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click("#delete-topic button")
    assert answer.value.status == 400
    assert "The name typed does not match: nothing was deleted." in page.inner_text("main")
    _shot(page, "delete-topic")
    assert topic in admin.list_topics(timeout=10).topics
    page.fill("#delete-topic input[name=confirm]", topic)
    _follow(page, "#delete-topic button")
    assert f"Topic '{topic}' deleted." in page.inner_text("main")
    assert topic not in [r[0] for r in _rows(page, "topics")]
    assert topic not in admin.list_topics(timeout=10).topics
    page.goto("/topics")
    page.fill("#create-topic input[name=name]", "bad name!")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        _follow(page, "#create-topic button")
    assert answer.value.status == 400
    assert "the cluster refused to create topic 'bad name!'" in page.inner_text(".error")


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/topics/no-such-topic", 404, "Topic 'no-such-topic' does not exist."),
    ("/topics/no-such-topic/messages", 404, "Topic 'no-such-topic' does not exist."),
    ("/groups/no-such-group", 404, "Group 'no-such-group' does not exist."),
    ("/nowhere", 404, "There is no page /nowhere"),
])
def test_unknown_things_are_404_pages(page, path, status, says):
    response = page.goto(path)
    assert response.status == status
    assert page.inner_text(".error") == says


def test_bad_offsets_are_400_pages(page, admin, broker):
    topic = _name("offsets")
    _create(admin, topic, 1)
    _produce(broker, topic, [{"value": b"v"} for _ in range(3)])
    response = page.goto(f"/topics/{topic}/messages?partition=0&offset=abc")
    assert (response.status, page.inner_text(".error")) == (
        400, "offset must be a whole number, not 'abc'")
    response = page.goto(f"/topics/{topic}/messages?partition=0&offset=7")
    assert (response.status, page.inner_text(".error")) == (
        400, f"offset 7 is out of range: partition 0 of '{topic}' holds offsets 0 to 2 "
             "(log start offset 0, high watermark 3)")
    response = page.goto(f"/topics/{topic}/messages?partition=5")
    assert (response.status, page.inner_text(".error")) == (
        404, f"Topic '{topic}' has no partition 5 (its partitions are 0 to 0).")
    response = page.goto(f"/topics/{topic}/messages?timestamp=yesterday")
    assert response.status == 400
    _shot(page, "bad-offset")


def test_spool_console_command_draws_live_throughput(page, admin, broker):
    """``spool console --read-only`` sampling every 0.3 s: the overview's chart, refreshed
    by the page's script without a reload, gains the topic produced to here."""
    topic = _name("live")
    _create(admin, topic, 1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "spool.cli.main", "console", "-b", broker.bootstrap,
         "--listen", "http://127.0.0.1:0", "--sample-interval", "0.3", "--read-only"],
        stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"listening on (http://\S+)", line).group(1)
        assert page.goto(url + "/").status == 200
        assert _rows(page, "brokers")[0][1] == f"127.0.0.1:{broker.port}"
        page.evaluate("window.loadedOnce = true")  # gone if the page reloads
        _produce(broker, topic, [{"value": b"v"} for _ in range(50)])
        series = f"#throughput polyline[data-series='{topic}']"
        page.wait_for_function(  # a sample after the produce saw records/s above 0
            f"[...document.querySelectorAll(\"{series}\")].some(p => p.dataset.max !== '0')",
            timeout=30000)
        assert page.evaluate("window.loadedOnce") is True
        _shot(page, "overview-live")
        page.goto(f"{url}/topics/{topic}")  # --read-only: no delete link, no form
        assert page.locator("text=Delete topic…").count() == 0
        assert page.goto(f"{url}/topics/{topic}/delete").status == 403
        assert topic in admin.list_topics(timeout=10).topics
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_a_console_without_a_cluster_says_so():
    proc = subprocess.Popen(
        [sys.executable, "-m", "spool.cli.main", "console", "-b", "127.0.0.1:1",
         "--listen", "http://127.0.0.1:0", "--timeout", "1"], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"listening on (http://\S+)", proc.stdout.readline()).group(1)
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(url + "/topics", timeout=30)
        assert answer.value.code == 503
        page = answer.value.read().decode()
        assert "no broker answered at 127.0.0.1:1 within 1 s" in page
        assert "Connection refused" in page  # librdkafka's last error, passed on
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_a_form_posted_from_another_site_changes_nothing(broker, admin):
    topic = _name("csrf")
    request = urllib.request.Request(
        broker.console_url + "/topics", data=f"name={topic}&partitions=1".encode(),
        headers={"Origin": "http://elsewhere.example"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(request, timeout=30)
    assert answer.value.code == 403
    assert "a form from http://elsewhere.example may not change this cluster" in \
        answer.value.read().decode()
    assert topic not in admin.list_topics(timeout=10).topics
