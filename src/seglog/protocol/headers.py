"""Request and response headers, and whole request/response frames.

Request header v1 (non-flexible APIs) and v2 (flexible)::

    RequestHeader => api_key int16, api_version int16, correlation_id int32,
                     client_id nullable int16-length string (never compact),
                     [v2: tagged fields]

Response header v0 is just ``correlation_id int32``; v1 adds tagged fields.
ApiVersions responses always use v0, so that a client can read the answer
even to a version it guessed wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from seglog.protocol import primitives as p
from seglog.protocol.api_keys import ApiKey, description, supported_range
from seglog.protocol.errors import DecodeError, UnsupportedVersionError
from seglog.protocol.schema import Api

_PREFIX = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header of a request."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: header, API description and body."""

    header: RequestHeader
    api: Api
    body: dict[str, Any]


def response_header_version(api_key: int, api_version: int) -> int:
    """0 or 1: ApiVersions always 0, otherwise 1 for flexible versions."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    api = description(api_key)
    return 1 if api is not None and api.is_flexible(api_version) else 0


def peek_header(frame: memoryview) -> RequestHeader:
    """The fixed part of a request header (api key, version, correlation id, client id)."""
    if len(frame) < _PREFIX.size:
        raise DecodeError(f"request of {len(frame)} bytes is too short for a header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(frame, 0)
    client_id, _ = p.read_string(frame, _PREFIX.size, flexible=False)
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def decode_request(frame: memoryview, *, check_supported: bool = True) -> Request:
    """Decode a request frame (without its size prefix).

    Raises :class:`UnsupportedVersionError` (carrying the correlation id) for an
    API or version the broker does not serve, :class:`DecodeError` otherwise.
    """
    header = peek_header(frame)
    api = description(header.api_key)
    allowed = supported_range(header.api_key) if check_supported else None
    if api is None or (check_supported and allowed is None):
        raise UnsupportedVersionError(
            f"unsupported API key {header.api_key}",
            header.api_key,
            header.api_version,
            header.correlation_id,
        )
    low, high = allowed if allowed is not None else api.versions
    if not low <= header.api_version <= high:
        raise UnsupportedVersionError(
            f"{api.name} version {header.api_version} is not supported (supported: {low}-{high})",
            header.api_key,
            header.api_version,
            header.correlation_id,
        )
    _, pos = p.read_string(frame, _PREFIX.size, flexible=False)
    if api.is_flexible(header.api_version):
        _, pos = p.skip_tagged_fields(frame, pos)
    body = api.decode_request(frame[pos:], header.api_version)
    return Request(header, api, body)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: dict[str, Any]
) -> list[Any]:
    """A response frame's chunks (without the size prefix): header, then body."""
    api = description(api_key)
    if api is None:
        raise ValueError(f"unknown API key {api_key}")
    chunks = api.encode_response(body, api_version)
    head = bytearray(_CORRELATION.pack(correlation_id))
    if response_header_version(api_key, api_version) == 1:
        head.append(0)  # no tagged fields
    if chunks and isinstance(chunks[0], bytes):
        return [bytes(head) + chunks[0], *chunks[1:]]
    return [bytes(head), *chunks]


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]
) -> bytes:
    """A request frame's bytes (without the size prefix), for clients and tests."""
    api = description(api_key)
    if api is None:
        raise ValueError(f"unknown API key {api_key}")
    head = bytearray(_PREFIX.pack(api_key, api_version, correlation_id))
    p.write_string(head, client_id, flexible=False)
    if api.is_flexible(api_version):
        head.append(0)
    chunks = api.encode_request(body, api_version)
    return bytes(head) + b"".join(bytes(c) for c in chunks)


def decode_response(
    api_key: int, api_version: int, frame: memoryview
) -> tuple[int, dict[str, Any]]:
    """(correlation id, body) of a response frame (without its size prefix)."""
    api = description(api_key)
    if api is None:
        raise ValueError(f"unknown API key {api_key}")
    correlation_id, pos = p.read_int32(frame, 0)
    if response_header_version(api_key, api_version) == 1:
        _, pos = p.skip_tagged_fields(frame, pos)
    return correlation_id, api.decode_response(frame[pos:], api_version)
