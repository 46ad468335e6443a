"""Records → pyarrow RecordBatches in the schema of :mod:`seglog.spark.schema`.

Columns are gathered as Python lists per chunk of a topic source's read (a v2
record batch read from a segment, or the rows of one fetch of a Kafka client,
see :mod:`seglog.topic_source`) and turned into Arrow arrays
once per output batch: no per-row tuple, no per-row Arrow call.

The v2 decoder here walks a batch's records as :func:`seglog.records.record.
decode_records` does, but appends each field straight to its column instead of
building a ``Record`` object per row; it is the one per-record loop Spark
forces on files mode, so it is kept flat.
"""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped]

from seglog._typing import BytesLike
from seglog.errors import CorruptRecordError
from seglog.records import batch
from seglog.records.legacy import NO_TIMESTAMP_TYPE
from seglog.records.record import records_block
from seglog.records.varint import decode_varlong
from seglog.spark.schema import ARROW_HEADERS_TYPE, ARROW_TIMESTAMP, arrow_schema
from seglog.topic_source.base import HeaderPairs, Rows

__all__ = ["NO_TIMESTAMP_TYPE", "ColumnBuilder"]

_MS = pa.timestamp("ms", tz="UTC")
HeaderList = HeaderPairs | None


class ColumnBuilder:
    """Column lists of one topic-partition's rows, turned into a RecordBatch by :meth:`build`."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self._schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[HeaderList] = []

    def __len__(self) -> int:
        return len(self.offsets)

    # ------------------------------------------------------------- appending

    def add_rows(self, rows: Rows) -> None:
        """Rows a topic source decoded (a broker's fetch, a legacy entry), all in range."""
        self.offsets.extend(rows.offsets)
        self.timestamps.extend(rows.timestamps)
        self.timestamp_types.extend(rows.timestamp_types)
        self.keys.extend(rows.keys)
        self.values.extend(rows.values)
        if self.include_headers:
            self.headers.extend(rows.headers or [None] * len(rows))

    def add_v2_batch(
        self,
        buf: BytesLike,
        position: int,
        header: batch.BatchHeader,
        from_offset: int,
        until_offset: int,
    ) -> None:
        """The records of the v2 batch at ``position`` whose offsets are in ``[from, until)``.

        Control batches (transaction markers) hold no user records and are
        skipped, as a Kafka consumer skips them.
        """
        if header.is_control or header.record_count == 0:
            return
        # One copy of the block as bytes: indexing and slicing bytes is much faster
        # than through a memoryview, and each key/value slice is then a single copy.
        data = bytes(records_block(buf, position, header))
        base_offset = header.base_offset
        base_ts = header.base_timestamp
        ts_type = header.timestamp_type
        log_append = ts_type == batch.LOG_APPEND_TIME
        want_headers = self.include_headers
        keys, values, offsets = self.keys, self.values, self.offsets
        timestamps, headers_col = self.timestamps, self.headers
        varint = decode_varlong
        pos = 0
        end = len(data)
        added = 0
        # Varints of one or two bytes (lengths and deltas of ordinary records) are
        # decoded inline; anything longer goes through decode_varlong.
        try:
            for _ in range(header.record_count):
                b = data[pos]
                if b < 0x80:
                    length = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif data[pos + 1] < 0x80:
                    raw = (b & 0x7F) | (data[pos + 1] << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = varint(data, pos)
                record_end = pos + length
                if length < 0 or record_end > end:
                    raise CorruptRecordError(
                        f"record of length {length} runs past the batch at offset {base_offset}"
                    )
                pos += 1  # attributes
                b = data[pos]
                if b < 0x80:
                    ts_delta = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif data[pos + 1] < 0x80:
                    raw = (b & 0x7F) | (data[pos + 1] << 7)
                    ts_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    ts_delta, pos = varint(data, pos)
                b = data[pos]
                if b < 0x80:
                    offset = base_offset + ((b >> 1) ^ -(b & 1))
                    pos += 1
                elif data[pos + 1] < 0x80:
                    raw = (b & 0x7F) | (data[pos + 1] << 7)
                    offset = base_offset + ((raw >> 1) ^ -(raw & 1))
                    pos += 2
                else:
                    delta, pos = varint(data, pos)
                    offset = base_offset + delta
                if offset < from_offset or offset >= until_offset:
                    pos = record_end
                    continue
                b = data[pos]
                if b < 0x80:
                    klen = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    klen, pos = varint(data, pos)
                if klen < 0:
                    keys.append(None)
                else:
                    keys.append(data[pos : pos + klen])
                    pos += klen
                b = data[pos]
                if b < 0x80:
                    vlen = (b >> 1) ^ -(b & 1)
                    pos += 1
                elif data[pos + 1] < 0x80:
                    raw = (b & 0x7F) | (data[pos + 1] << 7)
                    vlen = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    vlen, pos = varint(data, pos)
                if vlen < 0:
                    values.append(None)
                else:
                    values.append(data[pos : pos + vlen])
                    pos += vlen
                if pos > record_end:
                    raise CorruptRecordError(f"record at offset {offset} overruns its length")
                offsets.append(offset)
                timestamps.append(base_ts + ts_delta)
                if want_headers:
                    headers_col.append(_headers(data, pos, record_end))
                pos = record_end
                added += 1
        except IndexError:
            raise CorruptRecordError(
                f"truncated record in the batch at offset {base_offset}"
            ) from None
        if log_append:
            # LogAppendTime: every record carries the batch's max timestamp.
            timestamps[len(timestamps) - added :] = [header.max_timestamp] * added
        self.timestamp_types.extend([ts_type] * added)

    # -------------------------------------------------------------- building

    def build(self) -> pa.RecordBatch:
        """The rows gathered so far as one RecordBatch; the builder starts empty again."""
        n = len(self.offsets)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, _MS).cast(ARROW_TIMESTAMP),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, ARROW_HEADERS_TYPE))
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)


def _headers(data: BytesLike, pos: int, end: int) -> HeaderList:
    count, pos = decode_varlong(data, pos)
    if count == 0:
        return None
    if count < 0 or count * 2 > end - pos:
        raise CorruptRecordError(f"header count {count} does not fit in the record")
    out: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = decode_varlong(data, pos)
        if klen < 0:
            raise CorruptRecordError("a record header has a null key")
        hkey = bytes(data[pos : pos + klen]).decode("utf-8", errors="replace")
        pos += klen
        vlen, pos = decode_varlong(data, pos)
        hvalue = None if vlen < 0 else bytes(data[pos : pos + vlen])
        pos += max(vlen, 0)
        out.append((hkey, hvalue))
    if pos > end:
        raise CorruptRecordError("record headers run past the end of the record")
    return out
