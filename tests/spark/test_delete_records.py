"""Files mode after DeleteRecords: the broker records the new log start durably before it
answers, and files mode serves nothing below it. A path and a broker together are refused."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from tests.broker.conftest import BrokerProcess
from tests.spark.conftest import create_topic, produce

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from seglog.storage import checkpoints, reader


def test_files_mode_honours_delete_records_at_once(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [{"value": b"%d" % i} for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([ck.TopicPartition(topic, 0, 60)])
    assert [f.result(timeout=30).low_watermark for f in futures.values()] == [60]
    # Durable before the answer: what a restart (or files mode) reads says 60 already.
    path = broker.data / checkpoints.LOG_START_OFFSET_CHECKPOINT
    starts = checkpoints.read_offset_checkpoint(path)
    first_base = min(reader.segment_bases(broker.data / f"{topic}-0"))
    assert max(starts.get((topic, 0), 0), first_base) == 60
    rows = (
        spark.read.format("seglog")
        .option("subscribe", topic)
        .load(str(broker.data))
        .select("offset")
        .collect()
    )
    assert sorted(r["offset"] for r in rows) == list(range(60, 100))


def test_a_path_and_a_broker_together_are_refused(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    load = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "a")
        .load
    )
    with pytest.raises(Exception, match=r"Both a path \(.*\) and 'kafka.bootstrap.servers'"):
        load(str(broker.data))
