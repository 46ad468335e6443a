"""The field model and the generic codec, on small messages written for the purpose."""

from __future__ import annotations

import contextlib
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.protocol.errors import DecodeError, EncodeError
from seglog.protocol.schema import (
    INLINE_RECORDS_LIMIT,
    MAX_VERSION,
    F,
    Field,
    Message,
    RecordsRef,
    decode,
    decode_from,
    encode,
    encode_chunks,
    parse_versions,
    validate,
)
from tests.protocol.strategies import joined, message_strategy, normalise

# A message exercising each feature: versioned, nullable, tagged, nested, records.
SAMPLE = Message(
    99,
    "SampleRequest",
    (0, 3),
    2,
    (
        F("a", "int32"),
        F("b", "int16", "1+", default=-1),
        F("name", "string", nullable="1+"),
        F("gone", "int64", "0-1", default=7, ignorable=True),
        F(
            "items",
            "[]struct",
            fields=(
                F("id", "int32"),
                F("flag", "bool"),
                F("data", "records", nullable="0+"),
                F("hint", "int32", "2+", tag=0, default=-1),
            ),
        ),
        F("ids", "[]int64", nullable="2+"),
        F("maybe", "struct", "3+", nullable="3+", default=None, fields=(F("x", "int8", "3+"),)),
        F("tag_b", "string", "2+", tag=5, nullable="2+", default=None),
        F("tag_a", "uuid", "2+", tag=1),
    ),
)


def test_parse_versions() -> None:
    assert parse_versions("3+") == (3, MAX_VERSION)
    assert parse_versions("0-7") == (0, 7)
    assert parse_versions("5") == (5, 5)
    assert parse_versions("none") == (1, 0)
    assert parse_versions(None) == (1, 0)


def test_field_builder_and_predicates() -> None:
    f = F("x", "string", "2-5", nullable="4+", tag=3)
    assert f.versions == (2, 5) and f.nullable == (4, MAX_VERSION) and f.tagged == (2, 5)
    assert [f.present(v) for v in (1, 2, 5, 6)] == [False, True, True, False]
    assert [f.is_nullable(v) for v in (3, 4)] == [False, True]
    assert f.tagged_in(2) and not f.tagged_in(6)
    assert F("x", "[]int32").is_array and F("x", "[]int32").item_type == "int32"
    with pytest.raises(ValueError, match="unknown type"):
        F("x", "int128")
    with pytest.raises(ValueError, match="need fields"):
        F("x", "struct")
    with pytest.raises(ValueError, match="need fields"):
        F("x", "int8", fields=(F("y", "int8"),))
    with pytest.raises(ValueError, match="tagged versions"):
        Field("x", "int8", tag=1)


def test_defaults_follow_kafka_and_are_fresh() -> None:
    defaults = {f.name: f.default_value(0) for f in SAMPLE.fields}
    assert defaults["a"] == 0 and defaults["b"] == -1 and defaults["name"] == ""
    assert defaults["items"] == [] and defaults["tag_a"] == uuid.UUID(int=0)
    assert defaults["tag_b"] is None and defaults["maybe"] is None
    struct_field = F("s", "struct", fields=(F("p", "int32", default=-1), F("q", "[]int8")))
    assert struct_field.default_value(0) == {"p": -1, "q": []}
    assert struct_field.default_value(0) is not struct_field.default_value(0)
    # Records default to empty, not null: an entry that leaves them out stays readable.
    assert F("r", "records").default_value(0) == b""
    assert F("b", "bytes").default_value(0) == b""


def test_golden_v0_and_flexible_v2() -> None:
    value = {"a": 1, "name": "n", "items": [{"id": 2, "flag": True, "data": b"xy"}], "ids": [3]}
    v0 = encode(SAMPLE, 0, value)
    assert v0 == (
        struct.pack(">i", 1)
        + b"\x00\x01n"
        + struct.pack(">q", 7)  # "gone" at its default
        + struct.pack(">i", 1)
        + struct.pack(">i?i", 2, True, 2)
        + b"xy"
        + struct.pack(">iq", 1, 3)
    )
    v2 = encode(SAMPLE, 2, value)
    assert v2 == (
        struct.pack(">ih", 1, -1)
        + b"\x02n"  # compact string
        + b"\x02"  # compact array of one
        + struct.pack(">i?", 2, True)
        + b"\x03xy"  # compact records
        + b"\x00"  # item: no tagged fields (hint at its default)
        + b"\x02"
        + struct.pack(">q", 3)
        + b"\x00"  # top level: no tagged fields
    )
    decoded = decode(SAMPLE, 2, v2)
    assert normalise(decoded) == {
        "a": 1,
        "b": -1,
        "name": "n",
        "gone": 7,
        "items": [{"id": 2, "flag": True, "data": b"xy", "hint": -1}],
        "ids": [3],
        "maybe": None,
        "tag_b": None,
        "tag_a": uuid.UUID(int=0),
    }


def test_tagged_fields_written_in_tag_order_only_when_not_default() -> None:
    value = {"tag_b": "z", "tag_a": uuid.UUID(int=1), "items": [{"hint": 4}]}
    data = encode(SAMPLE, 2, value)
    # item: id, flag, empty records (left out: empty, never null), then one tagged field:
    # tag 0, size 4, int32 4.
    item = struct.pack(">i?", 0, False) + b"\x01" + b"\x01\x00\x04" + struct.pack(">i", 4)
    top_tags = b"\x02" + b"\x01\x10" + uuid.UUID(int=1).bytes + b"\x05\x02\x02z"
    assert data == struct.pack(">ih", 0, -1) + b"\x01" + b"\x02" + item + b"\x01" + top_tags
    decoded = decode(SAMPLE, 2, data)
    assert decoded["tag_b"] == "z" and decoded["items"][0]["hint"] == 4
    # A tagged field explicitly at its default is omitted, as Kafka does.
    assert encode(SAMPLE, 2, {"tag_a": uuid.UUID(int=0)}) == encode(SAMPLE, 2, {})


def test_unknown_tags_are_skipped_and_bad_ones_refused() -> None:
    base = encode(SAMPLE, 2, {})
    assert base[-1] == 0
    with_unknown = base[:-1] + b"\x02\x07\x03abc\x63\x00"  # tags 7 and 99, unknown
    assert decode(SAMPLE, 2, with_unknown) == decode(SAMPLE, 2, base)
    # A known tag whose bytes are longer than its value.
    stray = base[:-1] + b"\x01\x05\x03\x02zz"
    with pytest.raises(DecodeError, match="stray"):
        decode(SAMPLE, 2, stray)
    # A tagged field running past the end.
    with pytest.raises(DecodeError):
        decode(SAMPLE, 2, base[:-1] + b"\x01\x07\x09ab")


def test_nullable_struct_has_a_presence_byte() -> None:
    absent = encode(SAMPLE, 3, {"maybe": None})
    present = encode(SAMPLE, 3, {"maybe": {"x": 5}})
    assert len(present) == len(absent) + 2
    assert decode(SAMPLE, 3, present)["maybe"] == {"x": 5}
    assert decode(SAMPLE, 3, absent)["maybe"] is None


def test_absent_fields_get_fresh_defaults() -> None:
    data = encode(SAMPLE, 0, {})
    first, second = decode(SAMPLE, 0, data), decode(SAMPLE, 0, data)
    assert first["b"] == -1 and first["tag_a"] == uuid.UUID(int=0)
    first["items"].append(1)
    assert second["items"] == []


def test_nulls() -> None:
    assert decode(SAMPLE, 2, encode(SAMPLE, 2, {"ids": None}))["ids"] is None
    assert decode(SAMPLE, 1, encode(SAMPLE, 1, {"name": None}))["name"] is None
    with pytest.raises(EncodeError, match="not nullable"):
        encode(SAMPLE, 0, {"name": None})
    with pytest.raises(EncodeError, match="not nullable"):
        encode(SAMPLE, 0, {"ids": None})
    # Null on the wire where the version does not allow it.
    wire = bytearray(encode(SAMPLE, 0, {}))
    wire[4:6] = b"\xff\xff"
    with pytest.raises(DecodeError, match="null"):
        decode(SAMPLE, 0, bytes(wire))


def test_encode_errors_are_encode_errors() -> None:
    with pytest.raises(EncodeError):
        encode(SAMPLE, 0, {"a": 2**31})
    with pytest.raises(EncodeError):
        encode(SAMPLE, 0, {"a": "one"})
    with pytest.raises(EncodeError):
        encode(SAMPLE, 0, {"items": [{"data": 5}]})
    with pytest.raises(ValueError, match="no version 4"):
        encode(SAMPLE, 4, {})


def test_exactness_and_trailing_bytes() -> None:
    data = encode(SAMPLE, 1, {"a": 3})
    with pytest.raises(DecodeError, match="after the message"):
        decode(SAMPLE, 1, data + b"\x00")
    assert decode(SAMPLE, 1, data + b"\x00", exact=False)["a"] == 3
    value, end = decode_from(SAMPLE, 1, memoryview(b"\x00" + data), 1)
    assert value["a"] == 3 and end == len(data) + 1
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode(SAMPLE, 1, data[:cut])


def test_records_decode_to_views_of_the_frame() -> None:
    frame = bytearray(encode(SAMPLE, 2, {"items": [{"data": b"batch"}]}))
    records = decode(SAMPLE, 2, memoryview(frame))["items"][0]["data"]
    assert isinstance(records, memoryview) and bytes(records) == b"batch"
    frame[frame.index(b"batch")] = ord("B")
    assert bytes(records) == b"Batch"  # the same memory: nothing was copied


def test_records_holes() -> None:
    class Region:
        """Stands for a file region: sized, but no bytes in Python."""

        def __len__(self) -> int:
            return 1000

    region, ref = Region(), RecordsRef(3, source="file")
    big = b"z" * INLINE_RECORDS_LIMIT
    value = {"items": [{"data": region}, {"data": ref}, {"data": big}, {"data": b"in"}]}
    chunks = encode_chunks(SAMPLE, 2, value)
    holes = [c for c in chunks if not isinstance(c, (bytes, bytearray, memoryview))]
    assert holes == [region, ref]
    assert any(c is big for c in chunks)  # large bytes are not copied either
    assert len(chunks) == 7  # bytes, hole, bytes, hole, bytes, big, bytes
    # Filling the holes gives the same bytes as encoding the records inline.
    filled = joined([b"r" * 1000 if c is region else b"fff" if c is ref else c for c in chunks])
    inline = {"items": [{"data": b"r" * 1000}, {"data": b"fff"}, {"data": big}, {"data": b"in"}]}
    assert filled == encode(SAMPLE, 2, inline)
    assert sum(len(c) for c in chunks) == len(filled)
    with pytest.raises(EncodeError, match="cannot be joined"):
        encode(SAMPLE, 2, value)


def test_encode_into_a_given_head() -> None:
    head = bytearray(b"HDR")
    chunks = encode_chunks(SAMPLE, 0, {"a": 1}, head=head)
    assert chunks == [head] and bytes(head).startswith(b"HDR\x00\x00\x00\x01")


def test_validate() -> None:
    validate(SAMPLE, 2, {"a": 1, "items": [{"id": 1, "hint": 3}]})
    with pytest.raises(EncodeError, match="unknown field"):
        validate(SAMPLE, 2, {"typo": 1})
    with pytest.raises(EncodeError, match="not nullable"):
        validate(SAMPLE, 0, {"name": None})
    with pytest.raises(EncodeError, match="not in version 0"):
        validate(SAMPLE, 0, {"b": 5})  # not ignorable
    validate(SAMPLE, 2, {"gone": 9})  # ignorable: dropped silently
    validate(SAMPLE, 0, {"b": -1})  # at its default
    with pytest.raises(EncodeError, match="unknown field"):
        validate(SAMPLE, 2, {"items": [{"nope": 1}]})


def test_codecs_are_compiled_once() -> None:
    assert SAMPLE.codec(1) is SAMPLE.codec(1)
    assert SAMPLE.codec(2).flexible and not SAMPLE.codec(1).flexible


def test_never_flexible_field_keeps_int16_length() -> None:
    header = Message(
        -1, "H", (1, 2), 2, (F("client_id", "string", nullable="0+", never_flexible=True),)
    )
    assert encode(header, 2, {"client_id": "ab"}) == b"\x00\x02ab\x00"
    assert encode(header, 1, {"client_id": None}) == b"\xff\xff"


@pytest.mark.parametrize("version", range(4))
def test_round_trip(version: int) -> None:
    @settings(max_examples=60, deadline=None)
    @given(message_strategy(SAMPLE, version))
    def check(value: dict[str, Any]) -> None:
        data = encode(SAMPLE, version, value)
        assert normalise(decode(SAMPLE, version, data)) == normalise(value)

    check()


@given(st.binary(max_size=64))
def test_random_bytes_raise_only_decode_errors(data: bytes) -> None:
    for version in range(4):
        with contextlib.suppress(DecodeError):
            decode(SAMPLE, version, data)


def test_package_exports_are_documented() -> None:
    import inspect

    import seglog.protocol as protocol

    for name in protocol.__all__:
        obj = getattr(protocol, name)
        if inspect.isfunction(obj) or (inspect.isclass(obj) and name != "Chunk"):
            assert obj.__doc__, name
    assert "decode_request" in protocol.__all__ and "FrameBuffer" in protocol.__all__
