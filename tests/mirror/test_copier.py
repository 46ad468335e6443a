"""Mirror a log directory into a second broker: records, topics, configs and groups."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from seglog.mirror import LogDirSource, Mirror, OffsetMap, Target
from tests.broker.conftest import BrokerProcess
from tests.mirror.conftest import (
    commit,
    first_for_group,
    gaps,
    same_content,
    source_records,
    target_records,
)


def _mirror(root: Path, target: BrokerProcess, state: Path, **options: object) -> Mirror:
    source = LogDirSource(root)
    return Mirror(
        source,
        Target({"bootstrap.servers": target.bootstrap}, timeout=10),
        OffsetMap.load(state, source.description, target.bootstrap),
        **options,  # type: ignore[arg-type]
    )


def test_copies_every_record_in_order_with_topics_and_configs(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    mirror = _mirror(source_dir, target, tmp_path / "map.json")
    report = mirror.run()
    mirror.target.close()

    assert report.errors == []
    assert sorted(report.created) == ["events", "table"]
    assert report.partitions == 4
    for topic, partitions in (("events", 3), ("table", 1)):
        for p in range(partitions):
            expected = [same_content(r) for r in source_records(source_dir, topic, p)]
            held = [same_content(r) for r in target_records(target.bootstrap, topic, p)]
            assert held == expected, f"{topic}-{p}"
    assert report.records == 3 * 4 * 25 + len(source_records(source_dir, "table", 0))
    # Tombstones and null header values came through as nulls.
    events = target_records(target.bootstrap, "events", 0)
    assert any(r.value is None for r in events)
    assert all(r.headers[1].value is None for r in events)

    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["events"].partitions) == 3
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in ("events", "table")]
    configs = {
        r.name: {k: e.value for k, e in f.result(timeout=10).items()}
        for r, f in admin.describe_configs(resources).items()
    }
    assert configs["events"]["retention.ms"] == "86400000"
    assert configs["events"]["max.message.bytes"] == "500000"
    assert configs["table"]["cleanup.policy"] == "compact"
    assert configs["table"]["min.cleanable.dirty.ratio"] == "0.01"
    # Kafka's internal test setting (tiny segments at the source) is not carried over.
    assert configs["table"].get("internal.segment.bytes") in (None, "")


def test_translated_groups_resume_at_the_same_record(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    table = source_records(source_dir, "table", 0)
    missing = gaps(source_dir, "table", 0)
    assert missing, "the cleaner left no gap in the compacted topic"
    gap = missing[-1]
    after_gap = next(r for r in table if r.offset > gap)
    from seglog.storage.log_dir import LogDir

    with LogDir.open(source_dir) as logs:
        commit(logs, "g-table", {("table", 0): table[1].offset})
        commit(logs, "g-gap", {("table", 0): gap})

    mirror = _mirror(source_dir, target, tmp_path / "map.json")
    report = mirror.run()
    mirror.target.close()

    assert report.groups == {"g-events": 3, "g-gap": 1, "g-table": 1}
    # The target is dense: the same record sits at another offset, and a consumer of
    # the group gets the record it would have got from the source.
    got = first_for_group(target.bootstrap, "g-table", "table", 0)
    assert got is not None and same_content(got) == same_content(table[1])
    assert got.offset == 1 != table[1].offset
    events = source_records(source_dir, "events", 0)
    got = first_for_group(target.bootstrap, "g-events", "events", 0)
    assert got is not None and same_content(got) == same_content(events[30])
    # A commit of a compacted-away record maps to the next record, and is reported.
    got = first_for_group(target.bootstrap, "g-gap", "table", 0)
    assert got is not None and same_content(got) == same_content(after_gap)
    assert [(i.group, i.source) for i in report.inexact] == [("g-gap", gap)]


def test_groups_with_members_on_the_target_are_left_alone(
    source_dir: Path, target: BrokerProcess, tmp_path: Path
) -> None:
    from confluent_kafka import Consumer

    first = _mirror(source_dir, target, tmp_path / "map.json", groups="none")
    first.run()
    first.target.close()
    member = Consumer(
        {"bootstrap.servers": target.bootstrap, "group.id": "g-events", "session.timeout.ms": 6000}
    )
    member.subscribe(["events"])
    try:
        deadline = 50
        while not member.assignment() and deadline:
            member.poll(0.2)
            deadline -= 1
        assert member.assignment()
        again = _mirror(source_dir, target, tmp_path / "map.json")
        report = again.run()
        again.target.close()
    finally:
        member.close()
    assert "g-events" in report.skipped_groups
    assert "g-events" not in report.groups
    assert report.records == 0  # everything was already there


def test_log_append_time_topics_and_a_lost_map(target: BrokerProcess, tmp_path: Path) -> None:
    from seglog.records import batch
    from seglog.records.builder import SimpleRecord, build_batch
    from seglog.storage.log_dir import LogDir, LogDirSettings

    root = tmp_path / "stamped"
    with LogDir.open(root, settings=LogDirSettings(log_cleaner_enable=False)) as logs:
        logs.create_topic("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
        for i in range(5):
            records = [SimpleRecord(b"v%d" % i, b"k%d" % i, 1)]
            logs.append("stamped", 0, build_batch(records, timestamp_type=batch.LOG_APPEND_TIME))

    first = _mirror(root, target, tmp_path / "map.json")
    report = first.run()
    first.target.close()
    assert report.log_append_time == ["stamped"]
    held = target_records(target.bootstrap, "stamped", 0)
    assert [(r.key, r.value) for r in held] == [(b"k%d" % i, b"v%d" % i) for i in range(5)]

    # Without its map, a rerun matches what the target holds (timestamps aside, since the
    # target stamped its own) and copies nothing twice.
    again = _mirror(root, target, tmp_path / "other-map.json")
    report = again.run()
    again.target.close()
    assert (report.records, report.resumed) == (0, 5)
    assert len(target_records(target.bootstrap, "stamped", 0)) == 5


def test_only_committed_transactional_data_is_copied(target: BrokerProcess, tmp_path: Path) -> None:
    from seglog.storage.log_dir import LogDir
    from tests.mirror.test_source import write_transactions

    root = tmp_path / "source"
    write_transactions(root)
    mirror = _mirror(root, target, tmp_path / "map.json")
    mirror.run()
    # Aborted data never goes; the open transaction's waits for its marker.
    assert [r.value for r in target_records(target.bootstrap, "txn", 0)] == [
        b"p0", b"c0", b"c1", b"p1",
    ]  # fmt: skip
    with LogDir.open(root) as logs:
        logs.log("txn", 0).append_marker(102, 0, commit=True)
    report = mirror.run()
    mirror.target.close()
    assert report.errors == []
    assert [r.value for r in target_records(target.bootstrap, "txn", 0)] == [
        b"p0", b"c0", b"c1", b"p1", b"o0", b"p2",
    ]  # fmt: skip
