"""Option parsing with Spark's Kafka names, defaults and messages: pure, no Spark."""

from __future__ import annotations

import pytest

from seglog.spark.offsets import TopicPartition
from seglog.spark.options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_duration_ms,
    parse_source_options,
    parse_write_options,
)

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}


def batch(**options: str) -> SourceOptions:
    return parse_source_options({**BOOT, **options}, streaming=False)


def test_defaults_batch_and_stream() -> None:
    b = parse_source_options({**BOOT, "subscribe": "a, b,"}, streaming=False)
    assert b.strategy == Subscribe(("a", "b"))
    assert (b.starting, b.ending) == (Earliest(), Latest())
    assert b.fail_on_data_loss and not b.include_headers
    assert b.min_partitions is None and b.max_trigger_delay_ms == 15 * 60_000
    assert b.bootstrap_servers == "localhost:9092"
    assert b.kafka_params == {"bootstrap.servers": "localhost:9092"}
    s = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert s.starting == Latest()


def test_option_names_are_case_insensitive() -> None:
    o = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "or.*", "FAILONDATALOSS": "false"},
        streaming=True,
    )
    assert o.strategy == SubscribePattern("or.*")
    assert o.strategy.matches("orders") and not o.strategy.matches("xorders")
    assert not o.fail_on_data_loss


def test_assign() -> None:
    o = batch(assign='{"t": [0, 2]}')
    assert o.strategy == Assign((TopicPartition("t", 0), TopicPartition("t", 2)))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {},
            "One of the following options must be specified for Kafka source: assign, "
            "subscribe, subscribePattern",
        ),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options"),
        ({"subscribe": " , "}, "No topics to subscribe to"),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
        ({"assign": "a-0"}, "No topicpartitions to assign"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "x"},
            "'auto.offset.reset' is not supported",
        ),
        ({"subscribe": "a", "kafka.key.deserializer": "x"}, "'key.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "x"}, "'enable.auto.commit' is not"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "starting offset can't be latest"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest"),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't"),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't"),
        ({"subscribe": "a", "startingTimestamp": "x"}, "Expected a single long value, got x"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            r"minOffsetPerTrigger\(10\) is higher than the maxOffsetsPerTrigger\(5\)",
        ),
    ],
)
def test_batch_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        batch(**options)


def test_bootstrap_required_except_in_files_mode() -> None:
    with pytest.raises(ValueError, match=r"'kafka\.bootstrap\.servers' must be specified"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    files = parse_source_options({"path": "/data"}, streaming=False)
    assert files.files_mode and files.strategy is None


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(ValueError, match="ending offset not valid in streaming queries"):
        parse_source_options({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(ValueError, match="ending timestamp not valid in streaming queries"):
        parse_source_options(
            {**BOOT, "subscribe": "a", "endingOffsetsByTimestamp": "{}"}, streaming=True
        )


def test_offset_precedence_timestamp_first() -> None:
    o = batch(
        subscribe="a",
        startingTimestamp="1000",
        startingOffsetsByTimestamp='{"a":{"0":5}}',
        startingOffsets="earliest",
        endingOffsetsByTimestamp='{"a":{"0":7}}',
        endingOffsets='{"a":{"0":9}}',
    )
    assert o.starting == GlobalTimestamp(1000)
    assert o.ending == SpecificTimestamps({TopicPartition("a", 0): 7})
    o = batch(subscribe="a", startingOffsets=' {"a":{"0":4}} ')
    assert o.starting == SpecificOffsets({TopicPartition("a", 0): 4})


def test_trigger_options() -> None:
    o = parse_source_options(
        {
            **BOOT,
            "subscribe": "a",
            "maxOffsetsPerTrigger": "100",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "minPartitions": "4",
            "maxRecordsPerPartition": "50",
        },
        streaming=True,
    )
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger) == (100, 10)
    assert (o.max_trigger_delay_ms, o.min_partitions, o.max_records_per_partition) == (
        30_000,
        4,
        50,
    )
    assert [parse_duration_ms(t) for t in ("15m", "2h", "250", "1d")] == [
        900_000,
        7_200_000,
        250,
        86_400_000,
    ]


def test_commit_group_only_for_streams_over_a_broker() -> None:
    stream = parse_source_options(
        {**BOOT, "subscribe": "a", "commitOffsetsToGroup": "lag-view"}, streaming=True
    )
    assert stream.commit_group == "lag-view"
    with pytest.raises(ValueError, match="applies only to streaming queries over a broker"):
        batch(subscribe="a", commitOffsetsToGroup="g")
    with pytest.raises(ValueError, match="applies only to streaming queries over a broker"):
        parse_source_options({"path": "/d", "commitOffsetsToGroup": "g"}, streaming=True)


def test_write_options() -> None:
    w = parse_write_options({**BOOT, "topic": "out", "kafka.linger.ms": "5"})
    assert (w.topic, w.kafka_params["linger.ms"]) == ("out", "5")
    with pytest.raises(ValueError, match="must be specified for configuring Kafka producer"):
        parse_write_options({"topic": "out"})
    with pytest.raises(ValueError, match=r"'value\.serializer' is not supported"):
        parse_write_options({**BOOT, "kafka.value.serializer": "x"})
