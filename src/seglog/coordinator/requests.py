"""The coordinator's configuration, and the requests and answers it deals in.

Plain values: the broker's handlers build the requests from wire messages and
turn the answers back into wire messages; errors are Kafka's error names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from seglog.config import BrokerConfig

NONE = "NONE"
"""The error name of success."""


class Cancellable(Protocol):
    """A timer handle."""

    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], Cancellable]


@dataclass(frozen=True)
class CoordinatorConfig:
    """The broker settings of the coordinator, under Kafka's names and defaults."""

    initial_rebalance_delay_ms: int = 3_000
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104_857_600
    consumer_session_timeout_ms: int = 45_000
    """KIP-848 groups: a member's session, set by the broker (not the client)."""
    consumer_heartbeat_interval_ms: int = 5_000
    """KIP-848 groups: how often members are told to heartbeat."""
    share_session_timeout_ms: int = 45_000
    """Share groups: a member's session (``group.share.session.timeout.ms``)."""
    share_heartbeat_interval_ms: int = 5_000
    """Share groups: how often members are told to heartbeat."""
    share_max_size: int = 200
    """Share groups: the most members a group may have (``group.share.max.size``)."""

    _NAMES: ClassVar[dict[str, str]] = {
        "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
        "group.min.session.timeout.ms": "min_session_timeout_ms",
        "group.max.session.timeout.ms": "max_session_timeout_ms",
        "group.max.size": "max_group_size",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
        "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
        "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
        "group.share.session.timeout.ms": "share_session_timeout_ms",
        "group.share.heartbeat.interval.ms": "share_heartbeat_interval_ms",
        "group.share.max.size": "share_max_size",
    }

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> CoordinatorConfig:
        """Read the settings above from broker properties (``offsets.retention.minutes`` too).

        Values are parsed and validated by the configuration table
        (:data:`seglog.config.BROKER_CONFIGS`); a bad one raises InvalidConfigError.
        """
        config = properties if isinstance(properties, BrokerConfig) else BrokerConfig(properties)
        values: dict[str, int] = {
            attribute: int(config[name]) for name, attribute in cls._NAMES.items()
        }
        values["offsets_retention_ms"] = int(config["offsets.retention.minutes"]) * 60_000
        return cls(**values)


# ------------------------------------------------------------ requests, results


@dataclass(frozen=True)
class JoinRequest:
    """What the coordinator needs of a JoinGroup request."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True
    """JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED and its id."""
    supports_skip_assignment: bool = False
    """JoinGroup v9+: a static leader that rejoins is told not to reassign."""


@dataclass
class JoinResult:
    """A JoinGroup answer."""

    error: str = NONE
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    """(member id, group instance id, subscription) — for the leader only."""
    skip_assignment: bool = False


@dataclass
class SyncResult:
    """A SyncGroup answer."""

    error: str = NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class OffsetCommitEntry:
    """One partition of an OffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass
class CommitOutcome:
    """Per-partition errors of an OffsetCommit, and what to fsync before answering."""

    errors: dict[tuple[str, int], str]
    flush: tuple[int, int] | None = None
    """(``__consumer_offsets`` partition, offset to flush up to), if anything was written."""


@dataclass(frozen=True)
class MemberDescription:
    """One member in a DescribeGroups answer."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    """A DescribeGroups answer for one group."""

    group_id: str
    error: str
    state: str
    protocol_type: str
    protocol_data: str
    members: list[MemberDescription]
    missing: str | None = None
    """Why no classic group has this id ("Group g not found."): v6 answers GROUP_ID_NOT_FOUND."""
