"""A ``__consumer_offsets`` partition that cannot be loaded fails only its own groups.

Kafka's coordinator runtime loads each partition on its own: one whose load
fails (a batch that cannot be decoded, a partition that is offline) is
FAILED and its groups are refused (NOT_COORDINATOR, and FindCoordinator finds
no coordinator for them), while every other group is served.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest

from seglog.broker.handlers.groups import find_coordinator, load_groups
from seglog.broker.security.session import Session
from seglog.broker.settings import BrokerSettings
from seglog.broker.state import BrokerState
from seglog.coordinator.offset_store import TOPIC, partition_for
from seglog.coordinator.requests import OffsetCommitEntry
from seglog.protocol import ApiKey, error_codes
from seglog.protocol.headers import RequestHeader
from seglog.storage import filenames
from seglog.storage.log_dir import LogDir, LogDirSettings
from tests.coordinator.conftest import Harness
from tests.storage.faulty_env import installed

# The connection the handlers are called for (outside a real one).
CLIENT = Session(BrokerSettings().listeners[0], host="127.0.0.1")

PARTITIONS = 3


def _groups() -> tuple[str, str]:
    """Two group ids in different partitions: (in partition 0, in another)."""
    names = [f"group-{i}" for i in range(100)]
    broken = next(n for n in names if partition_for(n, PARTITIONS) == 0)
    fine = next(n for n in names if partition_for(n, PARTITIONS) != 0)
    return broken, fine


def _commit(h: Harness, group: str, offset: int) -> str:
    outcome = h.coordinator.commit_offsets(group, -1, "", None, [OffsetCommitEntry("t", 0, offset)])
    return outcome.errors[("t", 0)]


def _committed(h: Harness, group: str) -> tuple[str, int | None]:
    error, found = h.coordinator.fetch_offsets(group, [("t", 0)])
    entry = found[0][2] if found else None
    return error, None if entry is None else entry.offset


def _corrupt_first_batch(h: Harness, partition: int) -> None:
    """Give the first batch of the partition a compression codec that does not exist."""
    assert h.log_dir is not None
    path = h.log_dir.path / filenames.partition_dir_name(TOPIC, partition)
    log_file = path / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    data[22] = 0x07  # the low byte of the attributes: codec 7
    log_file.write_bytes(bytes(data))


@pytest.mark.leaves_damaged_log_dir(
    "a batch of __consumer_offsets is made undecodable; its CRC no longer matches"
)
def test_an_undecodable_batch_fails_only_the_groups_of_its_partition(tmp_path: Path) -> None:
    broken, fine = _groups()
    h = Harness(tmp_path / "data", offsets_topic_num_partitions=PARTITIONS)
    try:
        for group in (broken, fine):
            assert _commit(h, group, 5) == "NONE"
        assert h.log_dir is not None
        # The damaged batch is in an inactive segment, which a clean start does not check.
        h.log_dir.log(TOPIC, 0).roll()
        for group in (broken, fine):
            assert _commit(h, group, 7) == "NONE"
        h.coordinator.shutdown()
        h.log_dir.close()
        _corrupt_first_batch(h, 0)
        h.coordinator = h.open()
        coordinator = h.coordinator
        assert not coordinator.loading
        assert set(coordinator.failed_partitions) == {0}
        # The other partition's groups are served, as if nothing happened.
        assert _committed(h, fine) == ("NONE", 7)
        assert _commit(h, fine, 9) == "NONE"
        assert coordinator.coordinator_error(fine) is None
        # The broken partition's groups are refused, and nothing is written for them.
        assert _committed(h, broken)[0] == "NOT_COORDINATOR"
        assert _commit(h, broken, 11) == "NOT_COORDINATOR"
        assert h.join(broken)[0].error == "NOT_COORDINATOR"
        assert coordinator.describe_group(broken).error == "NOT_COORDINATOR"
        assert coordinator.delete_groups([broken]) == {broken: "NOT_COORDINATOR"}
        assert coordinator.coordinator_error(broken) == "COORDINATOR_NOT_AVAILABLE"
    finally:
        h.close()


def test_an_offline_offsets_partition_fails_only_its_groups(tmp_path: Path) -> None:
    broken, fine = _groups()
    data = tmp_path / "data"
    h = Harness(data, offsets_topic_num_partitions=PARTITIONS)
    try:
        assert _commit(h, broken, 5) == "NONE"
        assert _commit(h, fine, 6) == "NONE"
        h.coordinator.shutdown()
        assert h.log_dir is not None
        h.log_dir.close()
        with installed(data) as env:
            # The partition cannot be opened at start: the log directory serves it offline.
            env.fail("open", error=errno.EIO, in_dir=f"{TOPIC}-0", times=1000)
            h.coordinator = h.open()
            env.clear_faults()
            assert h.log_dir is not None
            assert (TOPIC, 0) in h.log_dir.offline()
            assert set(h.coordinator.failed_partitions) == {0}
            assert _committed(h, fine) == ("NONE", 6)
            assert _committed(h, broken)[0] == "NOT_COORDINATOR"
    finally:
        h.close()


@pytest.mark.leaves_damaged_log_dir(
    "a batch of __consumer_offsets is made undecodable; its CRC no longer matches"
)
def test_find_coordinator_has_no_coordinator_for_the_groups_of_a_failed_partition(
    tmp_path: Path,
) -> None:
    """The broker's FindCoordinator, over the loader: the failed partition's groups
    get COORDINATOR_NOT_AVAILABLE, the others this broker."""
    broken, fine = _groups()
    data = tmp_path / "data"
    h = Harness(data, offsets_topic_num_partitions=PARTITIONS)
    for group in (broken, fine):
        assert _commit(h, group, 5) == "NONE"
    assert h.log_dir is not None
    h.log_dir.log(TOPIC, 0).roll()
    assert _commit(h, broken, 7) == "NONE"
    h.close()
    _corrupt_first_batch(h, 0)
    settings = BrokerSettings.from_properties({"offsets.topic.num.partitions": str(PARTITIONS)})
    log_dir = LogDir.open(data, settings=LogDirSettings(log_cleaner_enable=False))

    async def main() -> dict[str, int]:
        state = BrokerState(settings, log_dir)
        try:
            await load_groups(state)
            header = RequestHeader(ApiKey.FIND_COORDINATOR, 4, 1, "test")
            body = {"key_type": 0, "coordinator_keys": [broken, fine]}
            response = await find_coordinator(state, header, body, CLIENT)
            return {c["key"]: c["error_code"] for c in response["coordinators"]}
        finally:
            state.coordinator.shutdown()

    try:
        assert asyncio.run(main()) == {
            broken: error_codes.code_for("COORDINATOR_NOT_AVAILABLE"),
            fine: 0,
        }
    finally:
        log_dir.close()
