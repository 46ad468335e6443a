"""Failed entries built whole: every field at its value in a failed entry, in every version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from seglog.protocol import entries
from seglog.protocol.api_keys import REGISTRY, ApiKey
from seglog.protocol.schema import Field, decode, encode

_CODE = 29  # TOPIC_AUTHORIZATION_FAILED: any non-zero code will do


def _error_paths(fields: tuple[Field, ...], prefix: str = "") -> Iterator[str]:
    """Every struct path (the body included) whose struct has an error code of its own."""
    names = {f.name for f in fields}
    if names & {"error_code", "partition_error_code"}:
        yield prefix
    for f in fields:
        if f.item_type == "struct":
            yield from _error_paths(f.fields, f"{prefix}.{f.name}" if prefix else f.name)


def _cases() -> Iterator[tuple[int, str]]:
    for api_key, info in sorted(REGISTRY.items()):
        for path in _error_paths(info.response.fields):
            yield api_key, path


def _placed(api_key: int, path: str, leaf: dict[str, Any]) -> dict[str, Any]:
    """A whole response body holding ``leaf`` at ``path``, one element per array on the way."""
    if not path:
        return leaf
    names = path.split(".")
    value = leaf
    for depth in range(len(names) - 1, -1, -1):
        parent = ".".join(names[:depth])
        field = next(f for f in entries.struct_fields(api_key, parent) if f.name == names[depth])
        value = entries.entry(
            api_key, parent, **{names[depth]: [value] if field.is_array else value}
        )
    return value


def _reach(body: dict[str, Any], api_key: int, path: str) -> dict[str, Any]:
    value = body
    parent = ""
    for name in path.split(".") if path else []:
        field = next(f for f in entries.struct_fields(api_key, parent) if f.name == name)
        value = value[name][0] if field.is_array else value[name]
        parent = f"{parent}.{name}" if parent else name
    return value


def _carried(api_key: int, path: str, version: int) -> bool:
    """Whether ``version`` carries every field on the way to ``path``."""
    parent = ""
    for name in path.split(".") if path else []:
        field = next(f for f in entries.struct_fields(api_key, parent) if f.name == name)
        if not field.present(version):
            return False
        parent = f"{parent}.{name}" if parent else name
    return True


CASES = list(_cases())


def test_every_partitioned_api_has_a_failed_partition_entry() -> None:
    paths = {(key, path) for key, path in CASES}
    for key, path in [
        (ApiKey.FETCH, "responses.partitions"),
        (ApiKey.PRODUCE, "responses.partition_responses"),
        (ApiKey.LIST_OFFSETS, "topics.partitions"),
        (ApiKey.OFFSET_COMMIT, "topics.partitions"),
        (ApiKey.OFFSET_FETCH, "topics.partitions"),
        (ApiKey.OFFSET_FETCH, "groups.topics.partitions"),
        (ApiKey.DELETE_RECORDS, "topics.partitions"),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, "topics.partitions"),
        (ApiKey.TXN_OFFSET_COMMIT, "topics.partitions"),
        (ApiKey.ADD_PARTITIONS_TO_TXN, "results_by_topic_v3_and_below.results_by_partition"),
        (ApiKey.DESCRIBE_PRODUCERS, "topics.partitions"),
        (ApiKey.WRITE_TXN_MARKERS, "markers.topics.partitions"),
        (ApiKey.CREATE_PARTITIONS, "results"),
        (ApiKey.DESCRIBE_TOPIC_PARTITIONS, "topics"),
        (ApiKey.METADATA, "topics"),
        (ApiKey.METADATA, "topics.partitions"),
    ]:
        assert (key, path) in paths


@pytest.mark.parametrize(("api_key", "path"), CASES, ids=[f"{k}:{p or 'body'}" for k, p in CASES])
def test_a_failed_entry_carries_every_field_at_its_failed_value(api_key: int, path: str) -> None:
    info = REGISTRY[api_key]
    built = entries.failed(api_key, path, _CODE)
    fields = entries.struct_fields(api_key, path)
    assert set(built) == {f.name for f in fields}  # nothing left out
    code_field = entries.error_field(api_key, path)
    assert built[code_field] == _CODE
    body = _placed(api_key, path, built)
    low, high = info.min_version, info.max_version
    versions = [v for v in range(low, high + 1) if _carried(api_key, path, v)]
    assert versions
    for version in versions:
        decoded = _reach(
            decode(info.response, version, encode(info.response, version, body)), api_key, path
        )
        for f in fields:
            if not f.present(version):
                continue
            got = decoded[f.name]
            if f.name == code_field:
                assert got == _CODE
            elif f.type == "records":
                # Empty, never null: librdkafka rejects a null Fetch partition outright.
                assert got is not None and bytes(got) == b"", (version, f.name)
            else:
                assert got == f.failed_value(version), (version, f.name)


def test_kafka_error_values_where_they_differ_from_the_defaults() -> None:
    fetch = entries.failed(ApiKey.FETCH, "responses.partitions", _CODE, partition_index=3)
    assert fetch["partition_index"] == 3
    assert fetch["high_watermark"] == -1  # FetchResponse.INVALID_HIGH_WATERMARK
    assert fetch["last_stable_offset"] == -1 and fetch["log_start_offset"] == -1
    assert fetch["records"] == b"" and fetch["preferred_read_replica"] == -1
    produce = entries.failed(ApiKey.PRODUCE, "responses.partition_responses", _CODE, index=1)
    assert produce["base_offset"] == -1 and produce["log_append_time_ms"] == -1
    assert produce["log_start_offset"] == -1 and produce["error_message"] is None
    offsets = entries.failed(ApiKey.OFFSET_FETCH, "topics.partitions", _CODE)
    assert offsets["committed_offset"] == -1 and offsets["committed_leader_epoch"] == -1
    assert offsets["metadata"] == ""
    deleted = entries.failed(ApiKey.DELETE_RECORDS, "topics.partitions", _CODE)
    assert deleted["low_watermark"] == -1
    listed = entries.failed(ApiKey.LIST_OFFSETS, "topics.partitions", _CODE)
    assert (listed["timestamp"], listed["offset"], listed["leader_epoch"]) == (-1, -1, -1)
    epochs = entries.failed(ApiKey.OFFSET_FOR_LEADER_EPOCH, "topics.partitions", _CODE)
    assert (epochs["leader_epoch"], epochs["end_offset"]) == (-1, -1)
    metadata = entries.failed(ApiKey.METADATA, "topics.partitions", _CODE)
    assert metadata["leader_id"] == -1


def test_a_misspelt_or_unknown_field_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="no field 'partition'"):
        entries.failed(ApiKey.FETCH, "responses.partitions", _CODE, partition=0)
    with pytest.raises(ValueError, match="no struct field 'partition'"):
        entries.failed(ApiKey.FETCH, "responses.partition", _CODE)
    with pytest.raises(ValueError, match="no error code"):
        entries.failed(ApiKey.FETCH, "responses", _CODE)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_fetch_partition_without_records_is_sent_empty_not_null(version: int) -> None:
    """The defect librdkafka met: a partition entry that left its records out."""
    body = {
        "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "error_code": _CODE}]}]
    }
    response = REGISTRY[ApiKey.FETCH].response
    data = encode(response, version, body)
    decoded = decode(response, version, data)["responses"][0]["partitions"][0]
    assert decoded["records"] is not None and bytes(decoded["records"]) == b""
    # On the wire: length 0 (compact 0 + 1 then three empty tagged sections; or int32 0),
    # never -1.
    assert data.endswith(b"\x01\x00\x00\x00" if version >= 12 else b"\x00\x00\x00\x00")
