"""An end-to-end pipeline on seglog with Spark: events in, windowed counts out, shown back.

Start the broker (``make run``), then in another terminal::

    .venv/bin/python examples/spark_pipeline.py                # against 127.0.0.1:9092
    .venv/bin/python examples/spark_pipeline.py --events 50000 --bootstrap host:port

What it does:

1. creates two topics: ``clicks`` (3 partitions) and ``clicks-per-user``, a
   compacted topic (``cleanup.policy=compact``) that keeps the latest count of
   each (user, window);
2. produces ``--events`` click events, key = user, value = JSON with the page,
   timestamps spread over the last few minutes;
3. runs a Structured Streaming job, ``readStream.format("seglog")`` →
   count per user per 1-minute event-time window (complete mode: PySpark's Python
   sinks take no update mode) → ``writeStream.format("seglog")``
   into the compacted topic, with ``Trigger.AvailableNow`` so it stops once it has
   caught up (run the script again after producing more: it resumes from its
   checkpoint in ``--checkpoint``);
4. reads the results back with a batch query and shows the busiest users.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import functions as F

import seglog.spark

EVENTS, COUNTS = "clicks", "clicks-per-user"


def create_topics(bootstrap: str) -> None:
    """Create the input and the compacted output topic unless they exist."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    wanted = [
        NewTopic(EVENTS, num_partitions=3, replication_factor=1),
        NewTopic(
            COUNTS, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"}
        ),
    ]
    new = [t for t in wanted if t.topic not in existing]
    for future in admin.create_topics(new).values() if new else []:
        future.result(timeout=30)


def produce_events(bootstrap: str, count: int) -> None:
    """``count`` clicks of 50 users over the last five minutes."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
    now_ms = int(time.time() * 1000)
    pages = ["/", "/search", "/cart", "/checkout", "/help"]
    for _ in range(count):
        user = f"user-{random.randrange(50):02d}"
        value = json.dumps({"page": random.choice(pages)})
        producer.produce(
            EVENTS, value.encode(), user.encode(), timestamp=now_ms - random.randrange(300_000)
        )
        producer.poll(0)
    producer.flush(30)


def run_pipeline(bootstrap: str, checkpoint: str) -> None:
    """The streaming job and the batch query that shows its output."""
    spark = seglog.spark.local_session(
        "local[2]", "seglog-pipeline", spark_sql_shuffle_partitions="2"
    )
    spark.sparkContext.setLogLevel("WARN")
    clicks = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20000")
        .load()
    )
    counts = (
        clicks.selectExpr("cast(key as string) as user", "timestamp")
        .groupBy("user", F.window("timestamp", "1 minute"))
        .count()
        .selectExpr(
            "concat(user, '@', date_format(window.start, 'HH:mm')) as key",
            "to_json(named_struct('user', user, 'window', window.start, 'clicks', count)) as value",
        )
    )
    query = (
        counts.writeStream.format("seglog")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", COUNTS)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    for progress in query.recentProgress:
        print(f"micro-batch {progress['batchId']}: {progress['numInputRows']} events")

    # Latest value per key, as a compacted topic's readers see it.
    (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", COUNTS)
        .load()
        .selectExpr("cast(key as string) as key", "cast(value as string) as value", "offset")
        .createOrReplaceTempView("results")
    )
    spark.sql(
        """
        select get_json_object(value, '$.user') as user,
               sum(cast(get_json_object(value, '$.clicks') as int)) as clicks
        from (select key, max_by(value, offset) as value from results group by key)
        group by 1 order by clicks desc limit 10
        """
    ).show()
    spark.stop()


def main() -> None:
    """Parse the arguments and run the three steps."""
    parser = argparse.ArgumentParser(description="seglog + Spark example pipeline")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--checkpoint", default="./data-spark-checkpoint")
    args = parser.parse_args()
    create_topics(args.bootstrap)
    produce_events(args.bootstrap, args.events)
    print(f"produced {args.events} events into {EVENTS!r}")
    run_pipeline(args.bootstrap, args.checkpoint)


if __name__ == "__main__":
    main()
