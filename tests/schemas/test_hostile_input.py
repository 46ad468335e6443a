"""What others write into ``_schemas`` and strangers send: taken in or refused, not a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest

from seglog.schemas import json_text, log_records
from seglog.schemas.formats import InvalidSchemaError, parse_schema
from seglog.schemas.log_records import RegistryKey, StoredSchema
from seglog.schemas.registry import RegistryError, RegistryWrites
from seglog.schemas.registry_state import RegistryState


def key(subject: str, version: int) -> bytes:
    return log_records.encode_key(RegistryKey(log_records.SCHEMA, subject, version))


def value(subject: str, version: int, schema_id: int, schema: str) -> bytes:
    return log_records.encode_schema(StoredSchema(subject, version, schema_id, "AVRO", schema))


def registered(state: RegistryState, subject: str, body: dict[str, object]) -> int:
    """Register through the registry's own operation, folding its records in."""
    answer, records = RegistryWrites(state).register(subject, body, normalize=False)
    for record in records:
        state.apply(*record)
    return int(answer["id"])


DEEP = [100_000, 1_000, json_text.MAX_DEPTH + 1]


@pytest.mark.parametrize("levels", DEEP)
def test_deep_json_is_refused_not_a_recursion_error(levels: int) -> None:
    with pytest.raises(json_text.TooDeepError):
        json_text.loads("[" * levels + "]" * levels)
    assert json_text.loads("[" * json_text.MAX_DEPTH + "]" * json_text.MAX_DEPTH) is not None
    for schema_type in ("AVRO", "JSON"):
        with pytest.raises(InvalidSchemaError, match="nested"):
            parse_schema(schema_type, '{"type":' * levels + '"int"' + "}" * levels, {})


def test_schemas_nested_as_deep_as_taken_in_parse_and_compare() -> None:
    """The limit sits where every parser still has stack to spare, on a thread's stack too."""
    levels = json_text.MAX_DEPTH // 2 - 1  # each object property is two levels
    text = '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels
    parsed = parse_schema("JSON", text, {})
    assert json_text.depth(json.loads(parsed.normalize().canonical())) <= json_text.MAX_DEPTH
    record = '"int"'
    for i in range(json_text.MAX_DEPTH // 3 - 1):  # record, fields, field: three levels each
        record = f'{{"type":"record","name":"R{i}","fields":[{{"name":"f","type":{record}}}]}}'
    state = RegistryState()
    assert registered(state, "deep", {"schema": record}) == 1
    assert registered(state, "deep", {"schema": record}) == 1


@pytest.mark.parametrize(
    ("raw_key", "raw_value"),
    [
        (b"[" * 100_000, b"{}"),
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b"[" * 100_000),
        (key("s", 1), b'{"subject":"s","version":1,"id":1,"schema":' + b"[" * 100_000),
        (b"\xff\xfe", b"\xff"),
        (b'{"keytype":"CONTEXT","tenant":"default","context":".ctx","magic":0}', b"{}"),
        (b'{"keytype":"SCHEMA","subject":"s","version":true,"magic":1}', value("s", 1, 9, '"x"')),
        (key("s", 1), b'{"subject":"s","version":1,"id":"9","schema":"\\"x\\""}'),
        (key("s", 1), b'{"subject":"s","version":1,"id":1.5,"schema":"\\"x\\""}'),
        (key("s", 1), b'{"subject":"s","version":1,"id":9,"schema":{"type":"int"}}'),
        (key("s", 1), b'{"subject":"s","version":1,"id":9,"schema":"1","schemaType":"XML"}'),
        (key("s", 1), b'{"subject":"s","version":1,"id":9,"schema":"1","references":{"a":1}}'),
        (key("s", 1), value("other", 4, 9, '"x"')),  # the value of another key
        (b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b"[1]"),
        (b'{"keytype":"MODE","subject":"s","magic":0}', b'{"mode":["READONLY"]}'),
    ],
)
def test_a_record_it_cannot_take_in_is_skipped_and_the_registry_goes_on(
    raw_key: bytes, raw_value: bytes
) -> None:
    state = RegistryState()
    state.apply(key("s", 1), value("s", 1, 1, '"string"'))
    state.apply(raw_key, raw_value)
    assert [(s.subject, s.version, s.id) for s in state.all_schemas(deleted=True)] == [("s", 1, 1)]
    assert state.effective_mode("s") == "READWRITE"
    # Still a working registry: the next schema of the subject registers, checked against it.
    state.apply(b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"NONE"}')
    assert registered(state, "s", {"schema": '"int"'}) == max(2, state.max_id)


def test_an_id_already_held_by_another_schema_is_skipped_first_one_keeps_it() -> None:
    state = RegistryState()
    state.apply(key("a", 1), value("a", 1, 5, '"string"'))
    state.apply(key("b", 1), value("b", 1, 5, '"int"'))  # id 5 again, another schema
    assert state.by_id(5) is not None and state.by_id(5).schema == '"string"'  # type: ignore[union-attr]
    assert state.subjects() == ["a"]
    # The same schema under another subject shares the id, as registering it would.
    state.apply(key("c", 1), value("c", 1, 5, '"string"'))
    assert [s.subject for s in state.id_holders(5)] == ["a", "c"]
    # A soft deletion rewrites the same version with the same schema: taken in.
    state.apply(
        key("a", 1),
        log_records.encode_schema(StoredSchema("a", 1, 5, "AVRO", '"string"', deleted=True)),
    )
    assert state.versions("a") == [] and state.versions("a", deleted=True) == [1]
    # The skipped record's id is never handed out again.
    assert state.max_id == 5
    assert registered(state, "d", {"schema": '"boolean"'}) == 6


def test_a_schema_already_registered_in_another_spelling_gets_its_id_and_its_text() -> None:
    state = RegistryState()
    # Written by another registry, not in seglog's canonical spelling.
    state.apply(key("a", 1), value("a", 1, 3, '{ "type" : "string" }'))
    assert registered(state, "b", {"schema": '{"type": "string"}'}) == 3
    b = state.latest("b")
    assert b is not None and b.id == 3 and b.schema == '{ "type" : "string" }'


def test_an_imported_id_held_by_another_schema_is_refused() -> None:
    state = RegistryState()
    state.apply(b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"IMPORT"}')
    registered(state, "a", {"schema": '"string"', "id": 7, "version": 1})
    with pytest.raises(RegistryError) as refused:
        registered(state, "b", {"schema": '"int"', "id": 7, "version": 1})
    assert refused.value.error_code == 42207
    assert registered(state, "c", {"schema": '"string"', "id": 7, "version": 1}) == 7
    assert state.subjects() == ["a", "c"]


def compacted(records: list[tuple[bytes, bytes | None]]) -> RegistryState:
    """The state a restart folds from ``records`` once fully compacted: the last record of
    each key's bytes, tombstones removed too (past ``delete.retention.ms``)."""
    last = {key: i for i, (key, _) in enumerate(records)}
    state = RegistryState()
    for i, (key_bytes, value_bytes) in enumerate(records):
        if last[key_bytes] == i and value_bytes is not None:
            state.apply(key_bytes, value_bytes)
    return state


def test_a_key_spelled_otherwise_does_not_outlive_its_deletion_in_a_compacted_topic() -> None:
    """Confluent's older registries wrote keys with other field orders and magic 0."""
    legacy_schema = b'{"subject":"old-value","version":1,"magic":1,"keytype":"SCHEMA"}'
    legacy_config = b'{"subject":"old-value","magic":0,"keytype":"CONFIG"}'
    log: list[tuple[bytes, bytes | None]] = [
        (legacy_schema, value("old-value", 1, 1, '"string"')),
        (legacy_config, b'{"compatibilityLevel":"NONE"}'),
    ]
    state = RegistryState()

    def run(records: list[tuple[bytes, bytes | None]]) -> None:
        for record in records:
            log.append(record)
            state.apply(*record)

    run(log[:])
    del log[2:]
    assert state.versions("old-value") == [1] and state.compatibility("old-value") == "NONE"
    writes = RegistryWrites(state)
    run(writes.set_config("old-value", {"compatibility": "FULL"})[1])
    assert state.compatibility("old-value") == "FULL"
    assert compacted(log).compatibility("old-value") == "FULL"
    run(writes.delete_version("old-value", "1", permanent=False)[1])
    assert state.versions("old-value", deleted=True) == [1] and not state.versions("old-value")
    assert compacted(log).versions("old-value", deleted=True) == [1]
    run(writes.delete_version("old-value", "1", permanent=True)[1])
    assert not state.has_subject("old-value") and state.config("old-value") is None
    after = compacted(log)
    assert not after.has_subject("old-value") and after.config("old-value") is None
    # Only this registry's own spelling is written from now on.
    assert all(
        key == log_records.encode_key(RegistryKey("SCHEMA", "old-value", 1))
        for key, v in log[2:]
        if v is not None and b"SCHEMA" in key
    )


@pytest.mark.parametrize("level", ["NONE", "BACKWARD", "FULL"])
def test_registering_parses_a_bounded_number_of_schemas_however_many_are_stored(
    monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """Finding a schema's id once parsed every schema stored, each registration: quadratic."""
    from seglog.schemas import registry

    state = RegistryState()
    state.apply(
        b'{"keytype":"CONFIG","subject":null,"magic":0}',
        json.dumps({"compatibilityLevel": level}).encode(),
    )

    def schema(i: int) -> str:
        fields = [{"name": "a", "type": "string", "default": ""}]
        return json.dumps({"type": "record", "name": "R", "namespace": f"n{i}", "fields": fields})

    for i in range(150):
        registered(state, f"s{i % 3}", {"schema": schema(i)})
    parses = 0
    real = registry.parse_schema

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal parses
        parses += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(registry, "parse_schema", counting)
    for i in range(150, 160):
        registered(state, f"s{i % 3}", {"schema": schema(i)})
    # A few per registration (the new schema, the latest version a level compares with,
    # the one registered just before), not one per schema stored.
    assert parses <= 10 * 4
    assert max(s.id for s in state.all_schemas()) == 160


@pytest.mark.parametrize(
    "body",
    [
        {"schema": json.dumps({"type": "string", "doc": chr(0xD800)})},
        {"schema": '"int"', "metadata": {"properties": {"a": chr(0xDFFF)}}},
    ],
)
def test_a_lone_surrogate_is_refused_before_it_reaches_a_record(body: dict[str, Any]) -> None:
    """Python reads ``"\\ud800"`` into a string no UTF-8 record can hold."""
    state = RegistryState()
    if "metadata" in body:
        with pytest.raises(ValueError, match="surrogate"):
            json_text.loads(json.dumps(body))
    else:
        # Escaped in the schema's text, itself JSON: refused as an invalid schema.
        with pytest.raises(RegistryError) as refused:
            registered(state, "s", body)
        assert refused.value.error_code == 42201
    with pytest.raises(RegistryError) as refused:
        registered(state, chr(0xD800), {"schema": '"int"'})
    assert refused.value.error_code == 42208


def test_a_stored_schema_that_does_not_parse_is_said_and_spares_the_rest() -> None:
    state = RegistryState()
    state.apply(key("bad", 1), value("bad", 1, 1, '{"type":"no such type"}'))
    dangling = StoredSchema("refs", 1, 2, "AVRO", '"int"', (log_records.Reference("X", "gone", 1),))
    state.apply(key("refs", 1), log_records.encode_schema(dangling))
    for subject in ("bad", "refs"):
        with pytest.raises(RegistryError) as refused:
            registered(state, subject, {"schema": '"string"'})
        assert (refused.value.status, refused.value.error_code) == (500, 50001)
        assert f"subject '{subject}' version 1" in refused.value.message
    assert registered(state, "good", {"schema": '"string"'}) == 3
    # A level that compares nothing does not read them.
    state.apply(b'{"keytype":"CONFIG","subject":"bad","magic":0}', b'{"compatibilityLevel":"NONE"}')
    assert registered(state, "bad", {"schema": '"string"'}) == 3


def test_ids_and_versions_stay_32_bit_as_the_wire_format_needs() -> None:
    """A record's header holds a 4-byte id: a larger one no serializer can write."""
    top = log_records.MAX_INT
    state = RegistryState()
    state.apply(key("huge", 1), value("huge", 1, top + 1, '"string"'))
    state.apply(key("huge", top + 1), value("huge", top + 1, 5, '"string"'))
    assert state.subjects() == [] and state.max_id == 0
    state.apply(key("top", 1), value("top", 1, top, '"string"'))
    assert state.max_id == top
    with pytest.raises(RegistryError) as refused:
        registered(state, "next", {"schema": '"int"'})
    assert refused.value.error_code == 50001
    # The same schema again keeps its id.
    assert registered(state, "again", {"schema": '"string"'}) == top
    state = RegistryState()
    state.apply(b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"IMPORT"}')
    for body in ({"id": top + 1, "version": 1}, {"id": 3, "version": top + 1}):
        with pytest.raises(RegistryError) as refused:
            registered(state, "imported", {"schema": '"int"', **body})
        assert refused.value.error_code == 42201
