"""The registry's state folded from ``_schemas`` records, in Confluent's layout."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from seglog.schemas import log_records
from seglog.schemas.log_records import Reference, RegistryKey, StoredSchema
from seglog.schemas.registry_state import RegistryState


def schema_record(
    subject: str,
    version: int,
    schema_id: int,
    *,
    deleted: bool = False,
    references: tuple[Reference, ...] = (),
) -> tuple[bytes, bytes]:
    stored = StoredSchema(
        subject, version, schema_id, "AVRO", f'"{subject}{version}"', references, deleted
    )
    key = log_records.encode_key(RegistryKey(log_records.SCHEMA, subject, version))
    return key, log_records.encode_schema(stored)


def test_keys_are_written_as_confluents_registry_writes_them() -> None:
    # Byte for byte: compaction folds seglog's and Confluent's writes of one key together.
    assert log_records.encode_key(RegistryKey("SCHEMA", "orders-value", 3)) == (
        b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    )
    assert log_records.encode_key(RegistryKey("CONFIG", None)) == (
        b'{"keytype":"CONFIG","subject":null,"magic":0}'
    )
    assert log_records.encode_key(RegistryKey("NOOP")) == b'{"keytype":"NOOP","magic":0}'
    assert log_records.encode_key(RegistryKey("DELETE_SUBJECT", "s")) == (
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    )


def test_a_value_written_by_confluents_registry_is_read() -> None:
    value = (
        b'{"subject":"t-value","version":1,"id":7,"schemaType":"PROTOBUF","references":'
        b'[{"name":"a.proto","subject":"a","version":2}],"schema":"syntax = \\"proto3\\";",'
        b'"deleted":false,"ts":1700000000000}'
    )
    stored = log_records.decode_schema(value)
    assert stored == StoredSchema(
        "t-value", 1, 7, "PROTOBUF", 'syntax = "proto3";', (Reference("a.proto", "a", 2),)
    )
    # Avro's type is the default, and omitted.
    avro = json.loads(log_records.encode_schema(StoredSchema("s", 1, 1, "AVRO", '"int"')))
    assert "schemaType" not in avro and avro["deleted"] is False


def test_soft_delete_hard_delete_and_subject_deletion() -> None:
    state = RegistryState()
    for record in (schema_record("s", 1, 1), schema_record("s", 2, 2), schema_record("t", 1, 1)):
        state.apply(*record)
    assert state.subjects() == ["s", "t"] and state.versions("s") == [1, 2]
    assert [s.subject for s in state.id_holders(1)] == ["s", "t"]
    state.apply(*schema_record("s", 1, 1, deleted=True))
    assert state.versions("s") == [2] and state.versions("s", deleted=True) == [1, 2]
    state.apply(log_records.encode_key(RegistryKey("SCHEMA", "s", 1)), None)
    assert state.versions("s", deleted=True) == [2]
    key = log_records.encode_key(RegistryKey("DELETE_SUBJECT", "s"))
    state.apply(key, log_records.encode_value({"subject": "s", "version": 2}))
    assert state.subjects() == ["t"] and state.subjects(deleted=True) == ["s", "t"]
    assert state.latest("s") is None and state.latest("s", deleted=True) is not None
    # A version registered after the subject's deletion is live.
    state.apply(*schema_record("s", 3, 5))
    assert state.versions("s") == [3] and state.max_id == 5
    clear = log_records.encode_key(RegistryKey("CLEAR_SUBJECT", "s"))
    state.apply(clear, log_records.encode_value({"subject": "s"}))
    assert not state.has_subject("s") and state.by_id(5) is None


def test_config_and_mode_fall_back_to_global_then_default() -> None:
    state = RegistryState()
    assert state.effective_compatibility("s") == "BACKWARD"
    assert state.effective_mode("s") == "READWRITE"
    config = log_records.encode_key(RegistryKey("CONFIG", None))
    state.apply(config, log_records.encode_value({"compatibilityLevel": "FULL"}))
    assert state.effective_compatibility("s") == "FULL"
    subject_config = log_records.encode_key(RegistryKey("CONFIG", "s"))
    state.apply(subject_config, log_records.encode_value({"compatibilityLevel": "NONE"}))
    assert state.effective_compatibility("s") == "NONE"
    state.apply(subject_config, None)
    assert state.effective_compatibility("s") == "FULL"
    mode = log_records.encode_key(RegistryKey("MODE", "s"))
    state.apply(mode, log_records.encode_value({"subject": "s", "mode": "READONLY"}))
    assert state.effective_mode("s") == "READONLY" and state.effective_mode("t") == "READWRITE"


def test_references_resolve_transitively_dependencies_first() -> None:
    state = RegistryState()
    state.apply(*schema_record("a", 1, 1))
    state.apply(*schema_record("b", 1, 2, references=(Reference("A", "a", 1),)))
    state.apply(*schema_record("c", 1, 3, references=(Reference("B", "b", 1),)))
    c = state.latest("c")
    assert c is not None
    assert list(state.resolved_references(c.references)) == ["A", "B"]
    assert state.referenced_by("a", 1) == [2]


def test_records_it_cannot_read_are_skipped_not_fatal() -> None:
    state = RegistryState()
    state.apply(b"not json", b"{}")
    state.apply(b'{"keytype":"SCHEMA","magic":1}', b"{}")
    state.apply(b'{"keytype":"ASSOC","magic":0}', b"{}")  # a kind this registry does not keep
    state.apply(*schema_record("s", 1, 1))
    assert state.subjects() == ["s"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from("abc"),
            st.integers(1, 4),
            st.integers(1, 6),
            st.booleans(),
            st.booleans(),
        ),
        max_size=40,
    )
)
def test_a_compacted_topic_gives_the_same_state(
    ops: list[tuple[str, int, int, bool, bool]],
) -> None:
    """Compaction keeps each key's last record: folding only those gives the same state."""
    records: list[tuple[bytes, bytes | None]] = []
    for subject, version, schema_id, deleted, tombstone in ops:
        key, value = schema_record(subject, version, schema_id, deleted=deleted)
        records.append((key, None if tombstone else value))
    full, compacted = RegistryState(), RegistryState()
    for key, value in records:
        full.apply(key, value)
    last = {key: i for i, (key, _) in enumerate(records)}
    for i, (key, value) in enumerate(records):
        if last[key] == i:
            compacted.apply(key, value)
    assert list(full.all_schemas(deleted=True)) == list(compacted.all_schemas(deleted=True))
    for schema_id in range(1, 7):
        assert full.id_holders(schema_id, deleted=True) == compacted.id_holders(
            schema_id, deleted=True
        )
