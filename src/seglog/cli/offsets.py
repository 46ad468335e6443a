"""``seglog offsets``: the earliest and latest offset of each partition, like kafka-get-offsets.sh.

``--timestamp MS`` adds the offset of the first message at or after that time
(ListOffsets by timestamp), ``-`` where no message is that recent.
"""

from __future__ import annotations

import click
from confluent_kafka import Consumer, TopicPartition

from seglog.cli._client import (
    ClientError,
    ClientSettings,
    client_options,
    partitions_option,
    reporting,
    text_table,
    topic_partitions,
)


@click.command("offsets")
@click.argument("topic")
@partitions_option("Only this partition (repeatable)  [default: all]")
@click.option(
    "--timestamp",
    type=int,
    default=None,
    metavar="MS",
    help="Also show the offset of the first message at or after MS (ms since the epoch).",
)
@client_options
def offsets(
    topic: str, partitions: tuple[int, ...], timestamp: int | None, client: ClientSettings
) -> None:
    """Print the earliest and latest offset of each partition of TOPIC.

    The latest offset is the one the next message will get (the high watermark).

    \b
    Example:
      seglog offsets orders --timestamp 1700000000000
    """
    with reporting("bad client configuration"):
        consumer = Consumer(client.config({"group.id": "seglog-cli", "enable.auto.commit": False}))
    try:
        ids = topic_partitions(consumer, client, topic, partitions)
        header = ["TOPIC", "PARTITION", "EARLIEST", "LATEST"]
        rows = []
        for p in ids:
            with reporting(f"cannot get the offsets of {topic!r} partition {p}"):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=client.timeout, cached=False
                )
            rows.append([topic, str(p), str(low), str(high)])
        if timestamp is not None:
            header.append(f"AT {timestamp}")
            wanted = [TopicPartition(topic, p, timestamp) for p in ids]
            with reporting(f"cannot look up offsets by time in {topic!r}"):
                found = consumer.offsets_for_times(wanted, timeout=client.timeout)
            by_partition = {tp.partition: tp for tp in found}
            for row, p in zip(rows, ids, strict=True):
                tp = by_partition[p]
                if tp.error is not None:
                    raise ClientError(f"{topic!r} partition {p}: {tp.error.str()}")
                row.append(str(tp.offset) if tp.offset >= 0 else "-")
    finally:
        consumer.close()
    for line in text_table([header, *rows]):
        click.echo(line)
