"""Dead letters: a share group's rejected and over-limit records copied to its DLQ topic.

Kafka's proposal for this (KIP-1191) names the group config
``errors.deadletterqueue.topic.name`` and the broker configs
``errors.deadletterqueue.topic.name.prefix`` (a DLQ topic's name must start
with it, ``dlq.`` by default, so that a consumer cannot have the broker write
into any topic it likes) and ``errors.deadletterqueue.auto.create.topics.enable``;
seglog uses those names. Each archived record becomes one record of the DLQ
topic whose headers say where it came from and why:

* ``__dlq.errors.topic``, ``__dlq.errors.partition``, ``__dlq.errors.offset``;
* ``__dlq.errors.group.id``, ``__dlq.errors.delivery.count``;
* ``__dlq.errors.reason``: ``rejected`` or ``delivery_count_limit``.

With ``errors.deadletterqueue.copy.record.enable`` the key, value, timestamp
and headers of the original record come too; without it the key and value
are null. Offsets with no record (compacted away, transaction markers) have
nothing to copy and are skipped. The DLQ record goes to the partition of the
same number, modulo the DLQ topic's partition count.

This is the rare path: it decodes records, which a share fetch never does.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from seglog.broker.share.partitions import GroupShareSettings, Key
from seglog.config import BrokerConfig
from seglog.errors import SeglogError
from seglog.records import record as record_codec
from seglog.records.builder import SimpleRecord, build_batch
from seglog.share.partition import ArchivedRange, SharePartition
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDir
from seglog.storage.topic_admin import TopicAdministration

logger = logging.getLogger(__name__)

_READ_BYTES = 1 << 20


class DeadLetters:
    """Writes a share group's archived records to its dead-letter topic."""

    def __init__(
        self,
        log_dir: LogDir,
        topic_admin: TopicAdministration,
        *,
        broker_config: Callable[[], BrokerConfig],
        notify: Callable[[list[Key]], None],
    ) -> None:
        self._log_dir = log_dir
        self._topic_admin = topic_admin
        self._broker_config = broker_config
        self._notify = notify
        #: Records written to dead-letter topics since the start.
        self.written = 0
        #: Appends a batch to a partition another node leads (nodes mode; None: alone).
        self.forward: Callable[[str, int, bytes], None] | None = None

    def __call__(
        self,
        share_partition: SharePartition,
        settings: GroupShareSettings,
        archived: list[ArchivedRange],
    ) -> None:
        """Copy the records of ``archived`` to ``settings.dead_letter_topic``."""
        dead = settings.dead_letter_topic
        config = self._broker_config()
        prefix = str(config["errors.deadletterqueue.topic.name.prefix"])
        group_id = share_partition.key.group_id
        if not dead.startswith(prefix):
            logger.warning(
                "share group %s: dead-letter topic %s does not start with %r "
                "(errors.deadletterqueue.topic.name.prefix); records not copied",
                group_id,
                dead,
                prefix,
            )
            return
        info = self._log_dir.topic(dead)
        if info is None:
            if not config["errors.deadletterqueue.auto.create.topics.enable"]:
                logger.warning(
                    "share group %s: dead-letter topic %s does not exist "
                    "(errors.deadletterqueue.auto.create.topics.enable is false)",
                    group_id,
                    dead,
                )
                return
            info = self._topic_admin.create_topic(dead)
        topic, partition = share_partition.topic, share_partition.key.partition
        source = self._log_dir.log(topic, partition)
        letters = [
            _letter(found, topic, partition, group_id, span, settings.dead_letter_copy_record)
            for span in archived
            for found in _records(source, span.first_offset, span.last_offset)
        ]
        if not letters:
            return
        target_partition = partition % info.partitions
        if self.forward is not None and not self._log_dir.serves_partition(dead, target_partition):
            # Its leader appends it: the partition is not open here.
            self.forward(dead, target_partition, bytes(build_batch(letters)))
            self.written += len(letters)
            return
        target = self._log_dir.log(dead, target_partition)
        try:
            target.append(build_batch(letters), from_client=False)
        except SeglogError as exc:
            logger.warning("share group %s: cannot write to %s: %s", group_id, dead, exc)
            return
        self.written += len(letters)
        self._notify([(dead, target_partition)])


def _letter(
    found: record_codec.Record,
    topic: str,
    partition: int,
    group_id: str,
    span: ArchivedRange,
    copy: bool,
) -> SimpleRecord:
    headers: list[tuple[str, bytes | None]] = []
    if copy:
        headers.extend((h.key, h.value) for h in found.headers)
    headers += [
        ("__dlq.errors.topic", topic.encode()),
        ("__dlq.errors.partition", str(partition).encode()),
        ("__dlq.errors.offset", str(found.offset).encode()),
        ("__dlq.errors.group.id", group_id.encode()),
        ("__dlq.errors.delivery.count", str(span.delivery_count).encode()),
        ("__dlq.errors.reason", span.reason.encode()),
    ]
    return SimpleRecord(
        value=found.value if copy else None,
        key=found.key if copy else None,
        timestamp=found.timestamp if copy else int(time.time() * 1000),
        headers=headers,
    )


def _records(log: Log, first: int, last: int) -> list[record_codec.Record]:
    """The records of ``log`` with offsets in [``first``, ``last``] that are still there."""
    out: list[record_codec.Record] = []
    offset = max(first, log.log_start_offset)
    while offset <= last:
        result = log.read(offset, _READ_BYTES, max_offset=log.log_end_offset)
        if result.data is None or result.data.region.length == 0:
            break
        region = result.data.region
        try:
            data = os.pread(region.fd, region.length, region.position)
        finally:
            region.release()
        decoded = list(record_codec.decode_entries(data))
        if not decoded:
            break
        out.extend(r for r in decoded if first <= r.offset <= last and r.offset >= offset)
        offset = max(r.offset for r in decoded) + 1
    return out
