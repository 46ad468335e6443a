"""The docs work as written: runnable blocks run, properties parse, generated pages match.

How blocks are marked and what is substituted: docs/architecture.md, "The docs and their
tests". The Spark blocks run in tests/spark/test_docs_spark.py.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seglog.config import BrokerConfig, broker_config, load_properties, parse_properties
from seglog.config_docs import render
from tests.broker.conftest import BrokerProcess, free_port
from tests.docs_blocks import PAGES, ROOT, Block, blocks, run_page, runnable_pages

SAMPLE = ROOT / "config" / "server.properties"


@pytest.mark.parametrize("page", runnable_pages(spark=False), ids=lambda p: p.name)
def test_runnable_blocks_run_against_a_real_broker(page: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    work = tmp_path / "work"
    work.mkdir()
    try:
        ran = run_page(page, broker.bootstrap, broker.data, work, spark=False)
    finally:
        assert broker.stop() == 0
    assert ran > 0


def _properties_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page) if b.info == "properties"]


def _check_properties(properties: dict[str, str], where: str) -> None:
    for name, value in properties.items():
        # Java properties read a comment after a value as part of the value.
        assert not re.search(r"\s#", value), f"{where}: {name} has a # comment after its value"
        assert broker_config(name) is not None, f"{where}: {name} is not a known setting"
    BrokerConfig(properties)  # raises with Kafka's message on a bad value


@pytest.mark.parametrize("block", _properties_blocks(), ids=lambda b: b.where)
def test_properties_blocks_parse_with_the_brokers_parser(block: Block) -> None:
    properties = parse_properties(block.text)
    assert properties, f"{block.where} sets nothing"
    _check_properties(properties, block.where)


def test_the_sample_server_properties_is_accepted() -> None:
    from seglog.broker.settings import BrokerSettings

    properties = load_properties(SAMPLE)
    _check_properties(properties, str(SAMPLE))
    settings = BrokerSettings.from_properties(properties)
    # The defaults a reader of the README expects.
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert properties["log.dirs"] == "./data"
    assert settings.nodes == 1
    # Comments on their own lines only.
    for number, line in enumerate(SAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        if line and not line.startswith("#"):
            assert "#" not in line, f"{SAMPLE}:{number}: a # after a value"


def test_the_sample_server_properties_starts_a_broker(tmp_path: Path) -> None:
    port = free_port()
    args = [sys.executable, "-m", "seglog", "serve", str(SAMPLE)]
    args += ["--override", f"log.dirs={tmp_path / 'data'}"]
    args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"the broker exited: {log.read_text()}"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, f"never listened: {log.read_text()}"
                time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text()
    assert (tmp_path / "data" / "meta.properties").is_file()


def test_the_configuration_page_matches_the_table() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == render(), (
        "docs/configuration.md is out of date: python -m seglog.config_docs > docs/configuration.md"
    )


def test_the_readme_stays_short_and_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name in ("metrics.md", "configs.md"):
            continue  # linked from operations.md and cli.md by their authors
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


# Linked before it exists: the metrics page comes with the metrics work.
_NOT_YET_WRITTEN = {"metrics.md"}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    inside = False
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_lead_somewhere(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = page if not path else (page.parent / path).resolve()
        if linked.name in _NOT_YET_WRITTEN:
            continue
        assert linked.exists(), f"{page.name} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name} links to {target}: no such heading"
