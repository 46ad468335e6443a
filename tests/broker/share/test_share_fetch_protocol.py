"""ShareFetch and ShareAcknowledge v1 on the wire: sessions, acquisition, acks, Kafka's errors."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from seglog.protocol import error_codes
from seglog.protocol.api_keys import ApiKey
from seglog.records.batch import HEADER
from tests.broker.conftest import BrokerProcess
from tests.broker.share.helpers import create_topic, produce_numbered, set_group_configs
from tests.broker.share.raw import (
    RawClient,
    ack,
    acquired,
    only_partition,
    setup_group,
    share_fetch,
    topic_id,
)

ACCEPT, RELEASE, REJECT = 1, 2, 3


def _code(name: str) -> int:
    return error_codes.code_for(name)


def test_a_session_opens_acquires_and_acknowledges(broker: BrokerProcess) -> None:
    _, tid, group = setup_group(broker)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        first = share_fetch(client, group, member, 0, [(tid, 0, [])])
        assert first["acquisition_lock_timeout_ms"] == 30_000
        assert acquired(first) == [(0, 9, 1)]
        records = bytes(only_partition(first)["records"])
        assert HEADER.unpack_from(records)[0] == 0  # the batch's base offset
        # Acknowledge all ten in the next fetch of the session (epoch 1).
        second = share_fetch(client, group, member, 1, [(tid, 0, [ack(0, 9, ACCEPT)])])
        assert second["error_code"] == 0
        entry = only_partition(second)
        assert entry["acknowledge_error_code"] == 0
        assert entry["acquired_records"] == []


def test_session_errors_are_kafkas(broker: BrokerProcess) -> None:
    _, tid, group = setup_group(broker)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        none = share_fetch(client, group, member, 5, [(tid, 0, [])])
        assert none["error_code"] == _code("SHARE_SESSION_NOT_FOUND")
        opened = share_fetch(client, group, member, 0, [(tid, 0, [])], max_records=1)
        assert opened["error_code"] == 0
        wrong = share_fetch(client, group, member, 7, [(tid, 0, [])])
        assert wrong["error_code"] == _code("INVALID_SHARE_SESSION_EPOCH")
        with_acks = share_fetch(client, group, member, 0, [(tid, 0, [ack(0, 0, ACCEPT)])])
        assert with_acks["error_code"] == _code("INVALID_REQUEST")
        ack_open = client.request(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {"group_id": group, "member_id": member, "share_session_epoch": 0, "topics": []},
        )
        assert ack_open["error_code"] == _code("INVALID_SHARE_SESSION_EPOCH")
        nobody = client.request(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {"group_id": group, "member_id": "nobody", "share_session_epoch": 3, "topics": []},
        )
        assert nobody["error_code"] == _code("SHARE_SESSION_NOT_FOUND")


def test_acknowledging_what_the_member_does_not_hold_is_invalid_record_state(
    broker: BrokerProcess,
) -> None:
    _, tid, group = setup_group(broker)
    alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    with RawClient(broker) as one, RawClient(broker) as two:
        assert acquired(share_fetch(one, group, alice, 0, [(tid, 0, [])])) == [(0, 9, 1)]
        share_fetch(two, group, bob, 0, [(tid, 0, [])])
        # Bob acknowledges Alice's records: refused, and they stay hers.
        stolen = share_fetch(two, group, bob, 1, [(tid, 0, [ack(0, 9, ACCEPT)])], max_records=0)
        assert only_partition(stolen)["acknowledge_error_code"] == _code("INVALID_RECORD_STATE")
        # An offset past anything acquired, and an unknown acknowledgement type.
        beyond = share_fetch(one, group, alice, 1, [(tid, 0, [ack(50, 60, ACCEPT)])], max_records=0)
        assert only_partition(beyond)["acknowledge_error_code"] == _code("INVALID_RECORD_STATE")
        bad = share_fetch(one, group, alice, 2, [(tid, 0, [ack(0, 9, 7)])], max_records=0)
        assert only_partition(bad)["acknowledge_error_code"] == _code("INVALID_REQUEST")
        # Her own, one type per offset: accepted, released, rejected, the rest accepted.
        own = client_ack(one, group, alice, 3, tid, [ack(0, 3, ACCEPT, RELEASE, REJECT, ACCEPT)])
        assert own["responses"][0]["partitions"][0]["error_code"] == 0
        # Offset 1 was released: it is the one record left for Bob.
        again = share_fetch(two, group, bob, 2, [(tid, 0, [])])
        assert acquired(again)[0] == (1, 1, 2)


def client_ack(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    tid: uuid.UUID,
    batches: list[dict[str, Any]],
) -> Any:
    """ShareAcknowledge v1 of ``batches`` on partition 0 of ``tid``."""
    return client.request(
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": epoch,
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [{"partition_index": 0, "acknowledgement_batches": batches}],
                }
            ],
        },
    )


def test_unknown_topic_id(broker: BrokerProcess) -> None:
    _, _, group = setup_group(broker)
    member = str(uuid.uuid4())
    unknown = uuid.uuid4()
    with RawClient(broker) as client:
        answer = share_fetch(client, group, member, 0, [(unknown, 0, [])])
        assert only_partition(answer)["error_code"] == _code("UNKNOWN_TOPIC_ID")
        acked = client_ack(client, group, member, 1, unknown, [ack(0, 0, ACCEPT)])
        assert acked["responses"][0]["partitions"][0]["error_code"] == _code("UNKNOWN_TOPIC_ID")


def test_closing_the_session_releases_at_once(broker: BrokerProcess) -> None:
    _, tid, group = setup_group(broker)
    alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    with RawClient(broker) as one, RawClient(broker) as two:
        assert acquired(share_fetch(one, group, alice, 0, [(tid, 0, [])])) == [(0, 9, 1)]
        closed = share_fetch(one, group, alice, -1, [(tid, 0, [ack(0, 1, ACCEPT)])])
        assert closed["error_code"] == 0
        # 0-1 accepted with the close; 2-9 released with their delivery count lowered.
        assert acquired(share_fetch(two, group, bob, 0, [(tid, 0, [])])) == [(2, 9, 1)]


def test_a_closed_connection_ends_its_session(broker: BrokerProcess) -> None:
    _, tid, group = setup_group(broker)
    alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    one = RawClient(broker)
    assert acquired(share_fetch(one, group, alice, 0, [(tid, 0, [])])) == [(0, 9, 1)]
    one.close()
    with RawClient(broker) as two:
        got: list[tuple[int, int, int]] = []
        epoch = 0
        while not got:  # the broker sees the close a moment later
            got = acquired(share_fetch(two, group, bob, epoch, [(tid, 0, [])], max_wait_ms=500))
            epoch += 1
        assert got == [(0, 9, 1)]


def test_a_waiting_fetch_answers_when_records_arrive(broker: BrokerProcess) -> None:
    topic, tid, group = setup_group(broker, records=0)
    member = str(uuid.uuid4())
    with RawClient(broker) as client:
        empty = share_fetch(client, group, member, 0, [(tid, 0, [])])
        assert only_partition(empty)["acquired_records"] == []
        answer: list[Any] = []
        waiter = threading.Thread(
            target=lambda: answer.append(
                share_fetch(client, group, member, 1, [], max_wait_ms=60_000)
            )
        )
        waiter.start()
        produce_numbered(broker, topic, 3)
        waiter.join()
        assert acquired(answer[0]) == [(0, 2, 1)]


def test_api_versions_advertise_the_share_apis(make_broker: Any) -> None:
    on: BrokerProcess = make_broker()
    off: BrokerProcess = make_broker(**{"group.share.enable": "false"})
    for broker, expected in ((on, True), (off, False)):
        with RawClient(broker) as client:
            versions = client.request(ApiKey.API_VERSIONS, 3, {})
            keys = {entry["api_key"]: entry for entry in versions["api_keys"]}
            for api in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE):
                assert (api in keys) is expected
                if expected:
                    assert (keys[api]["min_version"], keys[api]["max_version"]) == (1, 1)


def test_api_versions_finalize_the_share_version_feature(make_broker: Any) -> None:
    on: BrokerProcess = make_broker()
    off: BrokerProcess = make_broker(**{"group.share.enable": "false"})
    for broker, level in ((on, [1]), (off, [])):
        with RawClient(broker) as client:
            versions = client.request(ApiKey.API_VERSIONS, 3, {})
        supported = {f["name"]: f["max_version"] for f in versions["supported_features"]}
        assert supported["share.version"] == 1
        finalized = [
            f["max_version_level"]
            for f in versions["finalized_features"]
            if f["name"] == "share.version"
        ]
        assert finalized == level


def test_where_a_group_starts(broker: BrokerProcess) -> None:
    topic = create_topic(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    two_hours_ago = int(time.time() * 1000) - 2 * 3600 * 1000
    for n in range(5):
        producer.produce(topic, str(n).encode(), partition=0, timestamp=two_hours_ago)
    assert producer.flush(60) == 0
    produce_numbered(broker, topic, 5, start=5)
    tid = topic_id(broker, topic)
    starts = {
        "earliest": (0, 9),
        "by_duration:PT1H": (5, 9),  # the first record written within the last hour
    }
    with RawClient(broker) as client:
        for reset, expected in starts.items():
            group = f"g-{uuid.uuid4().hex[:8]}"
            set_group_configs(broker, group, {"share.auto.offset.reset": reset})
            ranges = acquired(share_fetch(client, group, str(uuid.uuid4()), 0, [(tid, 0, [])]))
            assert (ranges[0][0], ranges[-1][1]) == expected, reset
        # latest (the default): only what is written after the group first looked.
        group = f"g-{uuid.uuid4().hex[:8]}"
        member = str(uuid.uuid4())
        assert (
            only_partition(share_fetch(client, group, member, 0, [(tid, 0, [])]))[
                "acquired_records"
            ]
            == []
        )
        produce_numbered(broker, topic, 2, start=10)
        later = share_fetch(client, group, member, 1, [], max_wait_ms=30_000)
        assert acquired(later) == [(10, 11, 1)]
