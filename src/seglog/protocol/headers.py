"""Request and response headers, and whole request and response messages.

Grammar::

    RequestHeader v0  := request_api_key int16, request_api_version int16, correlation_id int32
    RequestHeader v1  := v0, client_id NULLABLE_STRING        (int16 length, -1 = null)
    RequestHeader v2  := v1, tagged_fields                     (client_id keeps its int16 length)
    ResponseHeader v0 := correlation_id int32
    ResponseHeader v1 := v0, tagged_fields

Which version applies is a function of (api key, api version) alone:
request header v2 for a flexible API version, else v1 (v0 is only
ControlledShutdown v0, which seglog does not describe); response header v1
for a flexible API version, else v0 — **except ApiVersions, whose responses
always use v0** so that a client that guessed a version too new can still
read the answer. Because ``client_id`` never uses a compact length, any
server can read the api key, version, correlation id and client id of any
request before it knows the API.

A server calls :func:`decode_request` on each frame. An API that is not
described raises :class:`UnknownApiKeyError`; a version outside the served
range raises :class:`UnsupportedVersionError`. Both carry the correlation id
and the API key, so the server can answer: Kafka answers an ApiVersions
request of an unknown version with a v0 body holding UNSUPPORTED_VERSION and
the ApiVersions range (:func:`unsupported_api_versions_response`) and closes
the connection in the other cases. Responses are built with
:func:`encode_response`, which returns chunks (see :mod:`.schema` for records
holes). :func:`encode_request` and :func:`decode_response` are the client's side.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from seglog.protocol import primitives as p
from seglog.protocol.api_keys import SUPPORTED, ApiKey, description
from seglog.protocol.errors import DecodeError, UnknownApiKeyError, UnsupportedVersionError
from seglog.protocol.schema import Api, Chunk, F, Message, decode, decode_from, encode_chunks

_PREFIX = struct.Struct(">hhi")
_HEADER_V1 = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_CORRELATION = struct.Struct(">i")
_SIZE = struct.Struct(">i")

UNSUPPORTED_VERSION = 35
"""Kafka's error code for a version the broker does not serve."""

REQUEST_HEADER = Message(
    -1,
    "RequestHeader",
    (0, 2),
    2,
    (
        F("request_api_key", "int16"),
        F("request_api_version", "int16"),
        F("correlation_id", "int32"),
        F("client_id", "string", "1+", nullable="1+", ignorable=True, never_flexible=True),
    ),
)
"""The request header in the schema notation (the fast path below is written by hand)."""

RESPONSE_HEADER = Message(-1, "ResponseHeader", (0, 1), 1, (F("correlation_id", "int32"),))
"""The response header in the schema notation."""


class RequestHeader(NamedTuple):
    """The header of a request."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class Request(NamedTuple):
    """A decoded request: header, API description and body."""

    header: RequestHeader
    api: Api
    body: dict[str, Any]


def request_header_version(api_key: int, api_version: int) -> int:
    """0, 1 or 2: 2 for flexible API versions, 0 only for ControlledShutdown v0."""
    if api_key == 7 and api_version == 0:
        return 0
    api = description(api_key)
    return 2 if api is not None and api.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """0 or 1: 1 for flexible API versions, but always 0 for ApiVersions."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    api = description(api_key)
    return 1 if api is not None and api.is_flexible(api_version) else 0


def _read_header(frame: memoryview) -> tuple[RequestHeader, int]:
    """The v1 part of a request header, and the position after it."""
    if len(frame) < _HEADER_V1.size:
        raise DecodeError(f"a request of {len(frame)} bytes is too short for a header")
    api_key, api_version, correlation_id, length = _HEADER_V1.unpack_from(frame, 0)
    pos = _HEADER_V1.size
    if length < 0:
        if length != -1:
            raise DecodeError(f"client id of negative length {length}")
        client_id = None
    else:
        end = pos + length
        if end > len(frame):
            raise DecodeError(f"client id of {length} bytes runs past the request")
        try:
            client_id = str(frame[pos:end], "utf-8")
        except UnicodeDecodeError:
            raise DecodeError("client id is not valid UTF-8") from None
        pos = end
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def peek_header(frame: memoryview) -> RequestHeader:
    """The header of a request frame (api key, version, correlation id, client id) only."""
    return _read_header(frame)[0]


def decode_request(
    frame: memoryview | bytes | bytearray,
    *,
    supported: Mapping[int, tuple[int, int]] | None = None,
    check_supported: bool = True,
) -> Request:
    """Decode a request frame (without its size prefix): header, then body.

    The version must lie in ``supported`` (default :data:`~.api_keys.SUPPORTED`,
    the ranges the broker serves), or with ``check_supported=False`` in the
    described range. Bytes after the body are ignored, as Kafka ignores them.
    Raises :class:`UnknownApiKeyError` / :class:`UnsupportedVersionError`
    (both carrying the correlation id) or :class:`DecodeError`.
    """
    if not isinstance(frame, memoryview):
        frame = memoryview(frame)
    header, pos = _read_header(frame)
    api_key, version = header.api_key, header.api_version
    api = description(api_key)
    if api is None:
        raise UnknownApiKeyError(
            f"unknown API key {api_key}", api_key, version, header.correlation_id, header.client_id
        )
    if check_supported:
        allowed = (SUPPORTED if supported is None else supported).get(api_key)
    else:
        allowed = api.versions
    if allowed is None or not allowed[0] <= version <= allowed[1]:
        served = "none" if allowed is None else f"{allowed[0]}-{allowed[1]}"
        raise UnsupportedVersionError(
            f"{api.name} v{version} is not supported (supported: {served})",
            api_key,
            version,
            header.correlation_id,
            header.client_id,
        )
    if api.is_flexible(version):
        if pos < len(frame) and frame[pos] == 0:
            pos += 1  # no header tagged fields: the usual case
        else:
            pos = p.skip_tagged_fields(frame, pos)
    body, _ = decode_from(api.request, version, frame, pos)
    return Request(header, api, body)


def _api(api_key: int) -> Api:
    api = description(api_key)
    if api is None:
        raise ValueError(f"API key {api_key} is not described")
    return api


def _finish(head: bytearray, chunks: list[Chunk], framed: bool) -> list[Chunk]:
    if framed:
        _SIZE.pack_into(head, 0, sum(map(len, chunks)) - _SIZE.size)
    return chunks


def encode_response(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Mapping[str, Any],
    *,
    framed: bool = False,
) -> list[Chunk]:
    """A response's chunks: header and body in one buffer, then any records holes.

    With ``framed`` the first 4 bytes are the int32 size prefix of the whole
    response (holes included), ready to write to a socket.
    """
    message = _api(api_key).response
    head = bytearray(4) if framed else bytearray()
    head += _CORRELATION.pack(correlation_id)
    if response_header_version(api_key, api_version) == 1:
        head.append(0)  # no header tagged fields
    return _finish(head, encode_chunks(message, api_version, body, head=head), framed)


def unsupported_api_versions_response(
    correlation_id: int,
    ranges: Mapping[int, tuple[int, int]] | None = None,
    *,
    framed: bool = False,
) -> list[Chunk]:
    """The answer to an ApiVersions request of a version not served.

    An ApiVersions v0 body with UNSUPPORTED_VERSION and the rows of ``ranges``
    — by default, as Kafka does, only the ApiVersions range of
    :data:`~.api_keys.SUPPORTED` — under a v0 response header.
    """
    if ranges is None:
        ranges = {ApiKey.API_VERSIONS: SUPPORTED[ApiKey.API_VERSIONS]}
    body = {
        "error_code": UNSUPPORTED_VERSION,
        "api_keys": [
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ranges.items())
        ],
    }
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body, framed=framed)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
    *,
    framed: bool = False,
) -> bytes:
    """A request's bytes (header and body; with ``framed``, the size prefix first)."""
    message = _api(api_key).request
    head = bytearray(4) if framed else bytearray()
    head += _PREFIX.pack(api_key, api_version, correlation_id)
    p.write_string(head, client_id)  # int16 length in every header version
    if request_header_version(api_key, api_version) == 2:
        head.append(0)
    chunks = _finish(head, encode_chunks(message, api_version, body, head=head), framed)
    parts = []
    for chunk in chunks:
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError(f"{type(chunk).__name__} records cannot be sent in a request")
        parts.append(chunk)
    return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)


def response_correlation_id(frame: memoryview) -> int:
    """The correlation id of a response frame, to match it with its request."""
    return p.read_int32(frame, 0)[0]


def decode_response(
    api_key: int, api_version: int, frame: memoryview | bytes | bytearray
) -> tuple[int, dict[str, Any]]:
    """(correlation id, body) of a response frame (without its size prefix).

    An ApiVersions response that does not parse at ``api_version`` is read
    again as v0: a broker answers a version it does not know with a v0 body
    (UNSUPPORTED_VERSION and its range), as Kafka's own client expects.
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    message = _api(api_key).response
    correlation_id, pos = p.read_int32(view, 0)
    if response_header_version(api_key, api_version) == 1:
        pos = p.skip_tagged_fields(view, pos)
    try:
        return correlation_id, decode(message, api_version, view[pos:])
    except DecodeError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        return correlation_id, decode(message, 0, view[pos:])


__all__ = [
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
    "Request",
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_header",
    "request_header_version",
    "response_correlation_id",
    "response_header_version",
    "unsupported_api_versions_response",
]
