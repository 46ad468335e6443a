"""The console in a real headless Chromium, against a real broker.

Each test drives the page as a user would (hash routes, forms) and writes a
screenshot of every page it visits to ``SEGLOG_SCREENSHOTS`` (default:
``test-screenshots/`` at the project's root, git-ignored). Chromium is
Debian's (``make install`` installs it), driven by Playwright; without it
the tests are skipped, saying so.
"""

from __future__ import annotations

import datetime
import os
import shutil
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.http_api.conftest import TIMEOUT, Api, ApiBroker, create_topic
from tests.broker.http_api.test_security import _prepare, _start
from tests.broker.security.conftest import Secured
from tests.broker.security.test_sasl import confluent

playwright_sync = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e .[dev])"
)

CHROMIUM = shutil.which("chromium")
PROJECT_ROOT = Path(__file__).resolve().parents[3]
WAIT_MS = TIMEOUT * 1000

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (make install installs it)"
)

StartBroker = Callable[..., ApiBroker]


def screenshots() -> Path:
    """Where the tests write their screenshots."""
    folder = Path(os.environ.get("SEGLOG_SCREENSHOTS", PROJECT_ROOT / "test-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (the system's: nothing is downloaded)."""
    with playwright_sync.sync_playwright() as driver:
        # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
        launched = driver.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (its own sessionStorage) that fails the test on a script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == [], f"script errors in the console: {errors}"


def shoot(page: Any, name: str) -> None:
    """A full-page screenshot of what is shown."""
    page.screenshot(path=str(screenshots() / f"{name}.png"), full_page=True)


def console(api: Api) -> str:
    return f"{api.scheme}://127.0.0.1:{api.port}/"


def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]], **kw: Any
) -> None:
    """Each record in its own batch, acknowledged (so that small segments fill up in turn)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in records:
        producer.produce(topic, key=key, value=value, **kw)
        producer.flush(30)
    assert producer.flush(30) == 0


def test_topic_segments_and_messages(api_broker: StartBroker, page: Any) -> None:
    # Small segments, so that the partition has several to draw.
    broker = api_broker()
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2, **{"internal.segment.bytes": "2048"})
    hostile = '<img src=x onerror="document.title=1">'
    produce(
        broker.bootstrap,
        topic,
        [(f"k{i}".encode(), f'{{"n": {i}, "pad": "{"x" * 80}"}}'.encode()) for i in range(60)]
        + [(hostile.encode(), b"\x00\x01\xfe\xff")],
        partition=0,
    )
    page.goto(console(broker.api) + "#/topics")
    row = page.locator(f'[data-testid="topics"] tr[data-topic="{topic}"]')
    row.wait_for()
    assert row.locator("td").nth(1).text_content() == "2"
    assert row.locator("td").nth(3).text_content() == "61"
    shoot(page, "topics")

    row.locator("a").click()
    page.wait_for_url(f"**#/topics/{topic}")
    line = page.locator('svg[data-testid="segment-line"][data-partition="0"]')
    line.wait_for()
    cid = urllib.parse.quote(
        page.locator('meta[name="seglog-cluster-id"]').get_attribute("content")
    )
    partitions = broker.api.get(f"/v3/clusters/{cid}/topics/{topic}/partitions").body["data"]
    segment_count = next(p["segment_count"] for p in partitions if p["partition_id"] == 0)
    assert segment_count > 1
    assert line.locator("g[data-base-offset]").count() == segment_count
    assert line.locator("rect.seg.active").count() == 1
    assert "HW 61" in line.text_content()
    page.locator('[data-testid="configs"]').wait_for()
    assert page.locator('[data-testid="configs"]').text_content().count("segment.bytes") == 1
    shoot(page, "topic")

    # Browse partition 0 from offset 5.
    page.goto(console(broker.api) + f"#/messages/{urllib.parse.quote(topic)}?partition=0&offset=5")
    first = page.locator('[data-testid="records"] tbody tr').first
    first.wait_for()
    assert first.get_attribute("data-offset") == "5"
    assert '"n": 5' in first.locator("td.value").text_content()
    # JSON pretty: the value is laid out over lines.
    page.select_option('[data-testid="format"]', "json")
    assert (
        '\n  "n": 5'
        in page.locator('[data-testid="records"] tbody tr').first.locator("td.value").text_content()
    )
    shoot(page, "messages")

    # By key, through the key index.
    page.fill('[data-testid="key"]', "k42")
    page.click('[data-testid="key-search"] button')
    page.wait_for_function(
        "() => document.querySelector('[data-testid=records] tbody tr')?.dataset.offset === '42'"
    )
    # A hostile key is shown as text, never run; its binary value as hex.
    page.fill('[data-testid="key"]', hostile)
    page.select_option('[data-testid="format"]', "hex")
    page.click('[data-testid="key-search"] button')
    page.wait_for_function(
        "() => document.querySelector('[data-testid=records] tbody tr')?.dataset.offset === '60'"
    )
    found = page.locator('[data-testid="records"] tbody tr').first
    assert found.locator("td.value").text_content() == "00 01 fe ff"
    assert page.locator('[data-testid="results"] img').count() == 0
    assert page.title() == "seglog console"
    shoot(page, "messages-by-key")


def test_a_group_s_lag_rises_and_falls(api_broker: StartBroker, page: Any) -> None:
    broker = api_broker()
    topic = f"lagged-{uuid.uuid4().hex[:6]}"
    group = f"readers-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(None, b"v")] * 10)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )

    def drain(count: int) -> None:
        read = 0
        while read < count:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read += 1
        consumer.commit(asynchronous=False)

    consumer.subscribe([topic])
    try:
        drain(10)
        page.goto(console(broker.api) + f"#/groups/{urllib.parse.quote(group)}")
        total = page.locator('[data-testid="total-lag"]')
        total.wait_for()
        page.wait_for_function(
            "() => document.querySelector('[data-testid=total-lag]')?.textContent === '0'"
        )
        produce(broker.bootstrap, topic, [(None, b"v")] * 25)
        page.wait_for_function(
            "() => document.querySelector('[data-testid=total-lag]')?.textContent === '25'"
        )
        shoot(page, "group-lag-risen")
        drain(25)
        page.wait_for_function(
            "() => document.querySelector('[data-testid=total-lag]')?.textContent === '0'"
        )
        points = int(page.locator('svg[data-testid="lag-chart"]').get_attribute("data-points"))
        assert points >= 3
        assert page.locator('[data-testid="members"] tbody tr').count() == 1
        shoot(page, "group")
        page.goto(console(broker.api) + "#/groups")
        page.locator(f'[data-testid="groups"] tr[data-group="{group}"]').wait_for()
        shoot(page, "groups")
    finally:
        consumer.close()


def test_a_user_is_refused_a_page_it_may_not_see(
    secured_broker: Callable[..., Secured], page: Any
) -> None:
    broker, api = _start(secured_broker, "SASL_PLAINTEXT")
    topic = f"secret-{uuid.uuid4().hex[:6]}"
    _prepare(broker, topic)
    page.goto(console(api) + f"#/topics/{urllib.parse.quote(topic)}")
    page.locator('[data-testid="login"]').wait_for()
    shoot(page, "login")

    def log_in(user: str, password: str) -> None:
        page.fill('input[name="user"]', user)
        page.fill('input[name="password"]', password)
        page.click('[data-testid="login"] button')

    log_in("alice", "wrong")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=login-status]')"
        "?.textContent.includes('Invalid')"
    )
    log_in("bob", "bob-secret")
    refused = page.locator('[data-testid="forbidden"]')
    refused.wait_for()
    assert "not authorized" in refused.text_content()
    shoot(page, "forbidden")
    # Alice may read the topic: the same page shows it.
    page.click("#logout")
    page.locator('[data-testid="login"]').wait_for()
    log_in("alice", "alice-secret")
    page.goto(console(api) + f"#/topics/{urllib.parse.quote(topic)}")
    page.locator('svg[data-testid="segment-line"]').wait_for()
    # ... but not its configs (READ is not DESCRIBE_CONFIGS): that part alone says so.
    page.locator('[data-testid="config-section"] [data-testid="forbidden"]').wait_for()
    assert page.locator('[data-testid="forbidden"]').count() == 1
    shoot(page, "topic-configs-forbidden")


def test_overview_page(api_broker: StartBroker, page: Any) -> None:
    broker = api_broker()
    topic = f"busy-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(None, b"v" * 1000)] * 20)
    page.goto(console(broker.api))
    page.locator('[data-testid="brokers"] tbody tr').first.wait_for()
    assert page.locator('[data-testid="version"]').text_content() != ""
    # The sampler's first samples (every 5 s) reach the chart as the page polls.
    page.wait_for_function(
        "() => document.querySelector('[data-testid=throughput-chart] polyline')"
        "?.getAttribute('points').split(' ').length >= 2",
        timeout=WAIT_MS * 2,
    )
    assert "Produce" in page.locator('[data-testid="requests"]').text_content()
    shoot(page, "overview")


def test_write_mode_produces_and_resets_offsets(api_broker: StartBroker, page: Any) -> None:
    broker = api_broker(**{"console.write.enable": "true"})
    topic = f"written-{uuid.uuid4().hex[:6]}"
    group = f"reset-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    page.goto(console(broker.api) + f"#/messages/{urllib.parse.quote(topic)}")
    form = page.locator('[data-testid="produce"]')
    form.wait_for()
    form.locator('input[name="key"]').fill("typed-key")
    form.locator('textarea[name="value"]').fill('{"typed": true}')
    form.locator('input[name="json"]').check()
    form.locator("button").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=produce-status]')"
        "?.textContent === 'written at partition 0 offset 0'"
    )
    page.fill('[data-testid="key"]', "typed-key")
    page.click('[data-testid="key-search"] button')
    found = page.locator('[data-testid="records"] tbody tr').first
    found.wait_for()
    assert found.locator("td.value").text_content() == '{"typed":true}'
    shoot(page, "messages-produced")

    # An empty group with a committed offset: reset to the earliest.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    page.goto(console(broker.api) + f"#/groups/{urllib.parse.quote(group)}")
    reset = page.locator('[data-testid="reset"]')
    reset.wait_for()
    reset.locator('input[name="topic"]').fill(topic)
    reset.locator('select[name="to"]').select_option("earliest")
    reset.locator("button").click()
    page.wait_for_function(
        f"() => document.querySelector('[data-testid=reset-status]')"
        f"?.textContent === '{topic}-0: 0'"
    )
    page.wait_for_function(
        "() => document.querySelector('[data-testid=total-lag]')?.textContent === '1'"
    )
    shoot(page, "group-reset")


def test_read_only_console_shows_no_write_forms(api_broker: StartBroker, page: Any) -> None:
    broker = api_broker()
    topic = f"readonly-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    page.goto(console(broker.api) + f"#/messages/{urllib.parse.quote(topic)}")
    page.locator('[data-testid="browse"]').wait_for()
    page.locator('[data-testid="key-search"]').wait_for()
    assert page.locator('[data-testid="produce"]').count() == 0


def test_security_page(secured_broker: Callable[..., Secured], page: Any) -> None:
    broker, api = _start(secured_broker, "SASL_PLAINTEXT")
    admin = ("admin", "admin-secret")
    topic = f"guarded-{uuid.uuid4().hex[:6]}"
    _prepare(broker, topic)
    # A transaction left open: listed, with its partition.
    transactional = Producer(
        {**confluent(broker.bootstrap, "PLAIN", *admin), "transactional.id": f"tx-{topic}"}
    )
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, value=b"pending")
    assert transactional.flush(30) == 0
    page.goto(console(api) + "#/security")
    page.fill('input[name="user"]', admin[0])
    page.fill('input[name="password"]', admin[1])
    page.click('[data-testid="login"] button')
    page.locator('[data-testid="users"] table').wait_for()
    page.locator('[data-testid="acls"] table').wait_for()
    assert "carol" in page.locator('[data-testid="users"]').text_content()
    assert "User:alice" in page.locator('[data-testid="acls"]').text_content()
    pending = page.locator('[data-testid="transactions"] tbody tr').filter(has_text=f"tx-{topic}")
    pending.wait_for()
    assert f"{topic}-0" in pending.text_content()
    shoot(page, "security")


def test_a_thousand_topics_page(api_broker: StartBroker, page: Any) -> None:
    broker = api_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = [f"t{i:04d}" for i in range(1000)]
    for start in range(0, len(names), 250):
        futures = admin.create_topics([NewTopic(n, 1) for n in names[start : start + 250]])
        for future in futures.values():
            future.result(120)
    page.goto(console(broker.api) + "#/topics")
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=topics] tbody tr').length === 1000",
        timeout=WAIT_MS * 2,
    )
    page.fill('[data-testid="topic-filter"]', "t099")
    assert page.locator('[data-testid="topics"] tbody tr:not([hidden])').count() == 10
    shoot(page, "topics-1000")


def test_browse_by_time(api_broker: StartBroker, page: Any) -> None:
    broker = api_broker()
    topic = f"timed-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    # Ten minutes ago, on a whole second (within message.timestamp.before.max.ms).
    base = (int(time.time()) - 600) * 1000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", timestamp=base + 1000 * i)
    assert producer.flush(30) == 0
    assert (
        broker.api.get(f"/v1/topics/{topic}/partitions/0/records", offset=0).body["high_watermark"]
        == 5
    )
    page.goto(console(broker.api) + f"#/messages/{urllib.parse.quote(topic)}")
    browse = page.locator('[data-testid="browse"]')
    browse.wait_for()
    browse.locator('select[name="mode"]').select_option("timestamp")
    # ISO-8601, as a user types it: the first record at or after is offset 3.
    typed = datetime.datetime.fromtimestamp((base + 2500) / 1000, datetime.UTC)
    browse.locator('input[name="from"]').fill(typed.isoformat(timespec="milliseconds"))
    browse.locator('button[type="submit"]').click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=records] tbody tr')?.dataset.offset === '3'"
    )
    assert page.locator('[data-testid="records"] tbody tr').count() == 2
    shoot(page, "messages-by-time")


def test_segments_marked_past_retention_and_by_the_cleaner(
    api_broker: StartBroker, page: Any
) -> None:
    broker = api_broker()
    kept = f"kept-{uuid.uuid4().hex[:6]}"
    compacted = f"compacted-{uuid.uuid4().hex[:6]}"
    # Retention keeps about 2 KiB: the older of the small segments are due (retention's
    # next pass, minutes away at the default interval, would delete them).
    create_topic(
        broker.bootstrap, kept, 1, **{"internal.segment.bytes": "1024", "retention.bytes": "2048"}
    )
    create_topic(
        broker.bootstrap,
        compacted,
        1,
        **{
            "internal.segment.bytes": "1024",
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    records = [(f"k{i % 3}".encode(), b"x" * 200) for i in range(40)]
    produce(broker.bootstrap, kept, records)
    produce(broker.bootstrap, compacted, records)

    page.goto(console(broker.api) + f"#/topics/{urllib.parse.quote(kept)}")
    line = page.locator('svg[data-testid="segment-line"]')
    line.wait_for()
    assert line.locator("rect.seg.past-retention").count() >= 1
    assert line.locator("rect.seg.active.past-retention").count() == 0
    shoot(page, "topic-retention")

    page.goto(console(broker.api) + f"#/topics/{urllib.parse.quote(compacted)}")
    line = page.locator('svg[data-testid="segment-line"]')
    line.wait_for()
    # Dirty segments the cleaner would clean next, or already cleaned if it was quick.
    assert line.locator("rect.seg.cleaner-next, rect.seg.cleaned").count() >= 1
    assert "dirty ratio" in page.locator(".partition-segments").text_content()
    shoot(page, "topic-compacted")
