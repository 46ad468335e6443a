"""The Spark blocks of the docs run as written (about 30 s each: a JVM and Python workers).

Each page with a ``runnable-spark`` block is run whole, every runnable block in order,
against a broker of its own (see docs/architecture.md, "The docs and their tests").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.conftest import BrokerProcess
from tests.docs_blocks import run_page, runnable_pages


@pytest.mark.slow
@pytest.mark.parametrize("page", runnable_pages(spark=True), ids=lambda p: p.name)
def test_spark_blocks_run_as_written(page: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"group.initial.rebalance.delay.ms": "0"})
    broker.start()
    work = tmp_path / "work"
    work.mkdir()
    try:
        assert run_page(page, broker.bootstrap, broker.data, work, spark=True) > 0
    finally:
        assert broker.stop() == 0
