"""Size-prefixed frames: reassembly from any split, the size guard, and prefixing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.protocol import FrameBuffer, FrameTooLargeError, RecordsRef, frame


def prefixed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@given(
    st.lists(st.binary(max_size=40), max_size=6),
    st.lists(st.integers(1, 30), min_size=1, max_size=20),
)
def test_frames_survive_any_split(payloads: list[bytes], steps: list[int]) -> None:
    stream = prefixed(payloads)
    buffer = FrameBuffer(64)
    got: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = steps[i % len(steps)]
        buffer.receive_data(stream[pos : pos + step])
        pos += step
        i += 1
        got += [bytes(f) for f in buffer.frames()]
    assert got == payloads
    assert buffer.buffered == 0 and buffer.next_frame() is None


def test_a_lone_frame_is_handed_over_without_a_copy() -> None:
    buffer = FrameBuffer(1 << 20)
    payload = bytes(range(256)) * 100
    buffer.receive_data(prefixed([payload]))
    frame_view = buffer.next_frame()
    assert frame_view is not None and bytes(frame_view) == payload
    assert buffer.buffered == 0
    # The next data goes to a fresh buffer; the view stays valid.
    buffer.receive_data(prefixed([b"next"]))
    assert bytes(buffer.next_frame() or b"") == b"next"
    assert bytes(frame_view) == payload


def test_frames_own_their_memory() -> None:
    buffer = FrameBuffer(100)
    buffer.receive_data(prefixed([b"first", b"second"]) + b"\x00\x00")
    first, second = list(buffer)
    buffer.receive_data(b"\x00\x01z")
    third = buffer.next_frame()
    assert (bytes(first), bytes(second), bytes(third or b"")) == (b"first", b"second", b"z")


def test_oversized_frame_is_reported_once() -> None:
    buffer = FrameBuffer(100)
    buffer.receive_data(prefixed([b"ok"]) + struct.pack(">i", 101) + b"x" * 10)
    frames = buffer.frames()
    assert bytes(next(frames)) == b"ok"
    with pytest.raises(FrameTooLargeError) as err:
        next(frames)
    assert (err.value.size, err.value.limit) == (101, 100)
    assert err.value.kafka_error == "INVALID_REQUEST"
    assert buffer.failed and buffer.buffered == 0
    buffer.receive_data(prefixed([b"more"]))  # ignored: the stream is unusable
    assert buffer.next_frame() is None and list(buffer.frames()) == []


def test_negative_size_is_refused() -> None:
    buffer = FrameBuffer(100)
    buffer.receive_data(struct.pack(">i", -5))
    with pytest.raises(FrameTooLargeError):
        buffer.next_frame()


def test_the_size_is_checked_before_the_body_arrives() -> None:
    buffer = FrameBuffer(1000)
    buffer.receive_data(struct.pack(">i", 2**31 - 1))
    with pytest.raises(FrameTooLargeError):
        buffer.next_frame()


def test_a_frame_at_the_limit_is_accepted() -> None:
    buffer = FrameBuffer(5)
    buffer.receive_data(prefixed([b"12345", b""]))
    assert [bytes(f) for f in buffer] == [b"12345", b""]


def test_frame_prefixes_the_total_size() -> None:
    assert frame([b"xy", b"z"]) == [b"\x00\x00\x00\x03xy", b"z"]
    assert frame([]) == [b"\x00\x00\x00\x00"]
    ref = RecordsRef(1000)
    chunks = frame([bytearray(b"head"), ref, memoryview(b"tail")])
    assert chunks[0] == struct.pack(">i", 1008) + b"head" and chunks[1] is ref
    big = b"b" * 100_000
    chunks = frame([big])
    assert chunks == [struct.pack(">i", len(big)), big] and chunks[1] is big
