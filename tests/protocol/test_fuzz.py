"""Fuzzing: random, truncated and mutated input gives DecodeError or a value, nothing else.

Every test here would also catch a hang or a runaway allocation: lengths and
counts are checked against the bytes that remain before anything is built, so
each decode is bounded by the size of its input (and the module has a timeout).
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.protocol import DecodeError, FrameBuffer, decode_request, decode_response
from seglog.protocol.api_keys import REGISTRY
from seglog.protocol.headers import request_header_version
from seglog.protocol.schema import Message, decode, encode
from tests.protocol.strategies import message_strategy

pytestmark = pytest.mark.timeout(120)

REQUESTS = [
    (info.request, version)
    for info in REGISTRY.values()
    for version in range(info.min_version, info.max_version + 1)
]
RESPONSES = [
    (info.response, version)
    for info in REGISTRY.values()
    for version in range(info.min_version, info.max_version + 1)
]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def encoded(cases: list[tuple[Message, int]]) -> st.SearchStrategy[tuple[Message, int, bytes]]:
    """A valid encoding of some message of ``cases``."""
    return st.sampled_from(cases).flatmap(
        lambda case: message_strategy(case[0], case[1]).map(
            lambda value: (case[0], case[1], encode(case[0], case[1], value))
        )
    )


def mutate(data: bytes, draw: Any) -> bytes:
    """Flip, overwrite, insert, delete or cut bytes of ``data``."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut"]))
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and buf:
            buf[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=5))
        elif kind == "delete" and buf:
            del buf[pos]
        elif kind == "cut":
            del buf[pos:]
    return bytes(buf)


def request_frame(message: Message, version: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", message.api_key, version, 1, 3) + b"cli"
    if request_header_version(message.api_key, version) == 2:
        head += b"\x00"
    return head + body


@FUZZ
@given(st.binary(max_size=300))
def test_random_frames(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_request(memoryview(data), check_supported=False)


@FUZZ
@given(
    st.sampled_from(sorted({message.api_key for message, _ in REQUESTS})),
    st.integers(-1, 20),
    st.binary(max_size=200),
)
def test_valid_headers_with_random_bodies(api_key: int, version: int, body: bytes) -> None:
    frame = struct.pack(">hhih", api_key, version, 1, -1) + body
    for check in (True, False):
        with contextlib.suppress(DecodeError):
            decode_request(memoryview(frame), check_supported=check)


@FUZZ
@given(encoded(REQUESTS), st.data())
def test_mutated_requests(case: tuple[Message, int, bytes], data: st.DataObject) -> None:
    message, version, body = case
    frame = mutate(request_frame(message, version, body), data.draw)
    with contextlib.suppress(DecodeError):
        decode_request(memoryview(frame), check_supported=False)


@FUZZ
@given(encoded(RESPONSES), st.data())
def test_mutated_responses(case: tuple[Message, int, bytes], data: st.DataObject) -> None:
    message, version, body = case
    frame = mutate(struct.pack(">i", 1) + b"\x00" + body, data.draw)
    with contextlib.suppress(DecodeError):
        decode_response(message.api_key, version, memoryview(frame))
    with contextlib.suppress(DecodeError):
        decode(message, version, mutate(body, data.draw))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(encoded(REQUESTS))
def test_every_truncation_of_a_request_fails_cleanly(case: tuple[Message, int, bytes]) -> None:
    message, version, body = case
    for cut in range(len(body)):
        try:
            decode(message, version, body[:cut])
        except DecodeError:
            continue
        raise AssertionError(f"{message.name} v{version} decoded {cut} of {len(body)} bytes")


@FUZZ
@given(st.lists(st.binary(max_size=50), max_size=10), st.integers(0, 64))
def test_frame_buffer_on_random_streams(pieces: list[bytes], limit: int) -> None:
    buffer = FrameBuffer(limit)
    failures = 0
    for piece in pieces:
        buffer.receive_data(piece)
        try:
            for frame in buffer.frames():
                assert len(frame) <= limit
                with contextlib.suppress(DecodeError):
                    decode_request(frame, check_supported=False)
        except DecodeError:
            failures += 1
    assert failures <= 1  # a bad size is reported once, then the stream is dead


def test_huge_counts_and_lengths_are_refused_at_once() -> None:
    # Produce v3 claiming 2**31 - 1 topics, and v9 claiming a 4 GiB records field.
    for frame in (
        struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhii", -1, 1, 0, 2**31 - 1),
        struct.pack(">hhih", 0, 9, 1, -1)
        + b"\x00"  # header tags
        + b"\x00\x00\x01\x00\x00\x00\x00"  # null txn id, acks, timeout
        + b"\x02\x02t\x02\x00\x00\x00\x00"  # one topic "t", one partition, index 0
        + b"\xff\xff\xff\xff\x0f",  # records length
    ):
        with pytest.raises(DecodeError):
            decode_request(memoryview(frame))
