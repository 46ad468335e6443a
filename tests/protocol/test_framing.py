"""Size-prefixed frames: reassembly from any split, the size guard, and prefixing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.protocol import FrameBuffer, FrameTooLargeError, RecordsRef, frame, framing


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


# ------------------------------------------ receiving into the buffer's memory


@settings(max_examples=500)
@given(
    st.lists(st.binary(max_size=200), max_size=8),
    st.lists(st.tuples(st.booleans(), st.integers(1, 90)), min_size=1, max_size=30),
)
def test_frames_survive_any_split_either_way(
    payloads: list[bytes], steps: list[tuple[bool, int]]
) -> None:
    old = framing.DIRECT_MIN, framing.SCRATCH_SIZE, framing.GROW_MIN
    framing.DIRECT_MIN, framing.SCRATCH_SIZE, framing.GROW_MIN = 16, 48, 8
    try:
        _check_split(payloads, steps)
    finally:
        framing.DIRECT_MIN, framing.SCRATCH_SIZE, framing.GROW_MIN = old


def _check_split(payloads: list[bytes], steps: list[tuple[bool, int]]) -> None:
    stream = prefixed(payloads)
    buffer = FrameBuffer(256)
    got: list[memoryview] = []
    pos = 0
    i = 0
    while pos < len(stream):
        into, step = steps[i % len(steps)]
        i += 1
        if into:
            target = buffer.get_buffer()
            n = min(step, len(target), len(stream) - pos)
            target[:n] = stream[pos : pos + n]
            del target
            buffer.buffer_updated(n)
        else:
            n = step
            buffer.receive_data(stream[pos : pos + n])
        pos += n
        got += list(buffer.frames())
    assert [bytes(f) for f in got] == payloads
    assert buffer.buffered == 0 and buffer.next_frame() is None


@pytest.fixture
def monkeypatch_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small thresholds, so that small frames take the in-place path."""
    monkeypatch.setattr(framing, "DIRECT_MIN", 16)
    monkeypatch.setattr(framing, "SCRATCH_SIZE", 48)


def test_a_large_frame_is_received_in_its_own_memory(monkeypatch_direct: None) -> None:
    buffer = FrameBuffer(1000)
    payload = bytes(range(200))
    stream = prefixed([payload, b"next"])
    target = buffer.get_buffer()
    target[:30] = stream[:30]
    del target
    buffer.buffer_updated(30)
    assert buffer.next_frame() is None
    target = buffer.get_buffer()
    assert len(target) == 200 - 26  # exactly the missing part of the frame
    target[:] = stream[30:204]
    del target
    buffer.buffer_updated(174)
    frame = buffer.next_frame()
    assert frame is not None and bytes(frame) == payload and frame.nbytes == 200
    buffer.receive_data(stream[204:])
    assert bytes(buffer.next_frame() or b"") == b"next"
    assert bytes(frame) == payload


def test_the_size_guard_holds_in_place(monkeypatch_direct: None) -> None:
    buffer = FrameBuffer(100)
    target = buffer.get_buffer()
    data = struct.pack(">i", 101) + b"x" * 10
    target[: len(data)] = data
    del target
    buffer.buffer_updated(len(data))
    with pytest.raises(FrameTooLargeError):
        buffer.next_frame()
    assert buffer.failed and buffer.buffered == 0


def test_memory_grows_with_the_bytes_that_arrive() -> None:
    """A 100 MiB announcement followed by 64 KiB costs about GROW_MIN, not 100 MiB."""
    buffer = FrameBuffer(200 << 20)
    size = 100 << 20
    buffer.receive_data(struct.pack(">i", size) + b"x" * (64 << 10))
    assert buffer.next_frame() is None and buffer.partial
    received = 64 << 10
    assert received + len(buffer.get_buffer()) <= framing.GROW_MIN
    # It grows as bytes keep coming, never far beyond them, up to the frame.
    while received < size:
        target = buffer.get_buffer()
        n = len(target)
        assert received + n <= max(framing.GROW_MIN, framing.GROW_FACTOR * received)
        target[:] = bytes([received % 251]) * n
        del target
        buffer.buffer_updated(n)
        received += n
    frame = buffer.next_frame()
    assert frame is not None and frame.nbytes == size and not buffer.partial
    assert frame[: 64 << 10] == b"x" * (64 << 10)
