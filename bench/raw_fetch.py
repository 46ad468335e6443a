"""A consumer with no client library: Fetch requests on a plain socket, records not decoded.

What a broker can serve, apart from what a client can decode: librdkafka's
consumer spends its time building one message object per record, so its rate
says little about the broker beyond a point. This one sends Fetch v12 with
large byte limits, receives each response into one buffer, reads the batch
headers to find the next offset and the record count, and never looks inside a
batch.
"""

from __future__ import annotations

import socket
import struct
import time

from seglog.protocol import ApiKey, decode_response, encode_request
from seglog.records import batch

FETCH_VERSION = 12
_SIZE = struct.Struct(">i")


class _Receiver:
    """Receives frames into one reused buffer: no fresh (zeroed, faulted) memory per frame."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray(1 << 20)

    def exactly(self, size: int) -> memoryview:
        if size > len(self.buffer):
            self.buffer = bytearray(size)
        view = memoryview(self.buffer)[:size]
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("the broker closed the connection")
            got += n
        return view


def fetch_raw(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    max_bytes: int = 64 << 20,
    partition_max_bytes: int = 8 << 20,
) -> tuple[int, int, float]:
    """Read ``count`` messages of partition 0 from offset 0: (messages, bytes, seconds).

    The clock starts at the first response, as for the client consumers.
    """
    host, port = bootstrap.rsplit(":", 1)
    messages = record_bytes = 0
    offset = 0
    start = 0.0
    correlation = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        receive = _Receiver(sock)
        while messages < count:
            correlation += 1
            body = {
                "max_wait_ms": 500,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "fetch_offset": offset,
                                "partition_max_bytes": partition_max_bytes,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            request = encode_request(ApiKey.FETCH, FETCH_VERSION, correlation, "bench", body)
            sock.sendall(_SIZE.pack(len(request)) + request)
            (size,) = _SIZE.unpack(bytes(receive.exactly(4)))
            _, response = decode_response(ApiKey.FETCH, FETCH_VERSION, receive.exactly(size))
            partition = response["responses"][0]["partitions"][0]
            if partition["error_code"]:
                raise RuntimeError(f"Fetch failed with error {partition['error_code']}")
            first = not start
            if first:
                start = time.perf_counter()
            got = got_bytes = 0
            records = partition["records"]
            position = 0
            # A response may end in part of a batch (a byte limit cut it): as
            # clients do, count whole batches only and fetch the rest again.
            while position + batch.HEADER_SIZE <= len(records):
                header = batch.BatchHeader._make(batch.HEADER.unpack_from(records, position))
                if position + header.size > len(records):
                    break
                got += header.record_count
                got_bytes += header.size
                offset = header.next_offset
                position += header.size
            if first:
                count -= got  # the first response only starts the clock
            else:
                messages += got
                record_bytes += got_bytes
    return messages, record_bytes, time.perf_counter() - start


__all__ = ["fetch_raw"]
