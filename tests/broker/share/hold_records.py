"""A share consumer that takes records and never acknowledges them (run as a process).

``python -m tests.broker.share.hold_records BOOTSTRAP GROUP TOPIC`` polls in
explicit mode until it has records, prints their offsets on one line, then
holds them: it keeps its connection and never polls again, until killed or
stopped by the test.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import ShareConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    while True:
        offsets = [m.offset() for m in consumer.poll(0.5) if m.error() is None]
        if offsets:
            print(" ".join(map(str, offsets)), flush=True)
            break
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
