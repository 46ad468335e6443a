"""The Kafka wire protocol without I/O: bytes in, dicts out, and chunks back.

Layers, bottom up: :mod:`.primitives` (wire types over memoryviews),
:mod:`.schema` (the field model and the codec compiled from it),
:mod:`.messages` (one declarative table per API family), :mod:`.api_keys`
(the registry and the advertised ranges), :mod:`.headers` (request and
response headers, whole messages), :mod:`.framing` (size-prefixed frames) and
:mod:`.error_codes`; :mod:`.bodies` holds the request and response bodies as
``TypedDict`` classes generated from the tables (:mod:`seglog.gen_bodies`) and
:mod:`.entries` builds response entries whole from them. Nothing here opens a
socket or a file or reads a clock.

A server's loop, in outline::

    buffer = FrameBuffer(max_frame_size)
    buffer.receive_data(data)                   # whatever the socket delivered
    for frame in buffer.frames():
        request = decode_request(frame)         # header + body dict
        body = handle(request)
        chunks = encode_response(request.header.api_key, request.header.api_version,
                                 request.header.correlation_id, body, framed=True)
        send(chunks)                            # bytes-like, or records objects to sendfile
"""

from seglog.protocol import error_codes
from seglog.protocol.api_keys import (
    REGISTRY,
    SUPPORTED,
    ApiInfo,
    ApiKey,
    api_versions_entries,
    description,
    supported_range,
)
from seglog.protocol.errors import (
    DecodeError,
    EncodeError,
    FrameTooLargeError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from seglog.protocol.framing import FrameBuffer, frame
from seglog.protocol.headers import (
    Request,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    request_header_version,
    response_correlation_id,
    response_header_version,
    unsupported_api_versions_response,
)
from seglog.protocol.schema import (
    Api,
    Chunk,
    Field,
    Message,
    RecordsRef,
    decode,
    encode,
    encode_chunks,
    validate,
)

__all__ = [
    "REGISTRY",
    "SUPPORTED",
    "Api",
    "ApiInfo",
    "ApiKey",
    "Chunk",
    "DecodeError",
    "EncodeError",
    "Field",
    "FrameBuffer",
    "FrameTooLargeError",
    "Message",
    "RecordsRef",
    "Request",
    "RequestHeader",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "api_versions_entries",
    "decode",
    "decode_request",
    "decode_response",
    "description",
    "encode",
    "encode_chunks",
    "encode_request",
    "encode_response",
    "error_codes",
    "frame",
    "peek_header",
    "request_header_version",
    "response_correlation_id",
    "response_header_version",
    "supported_range",
    "unsupported_api_versions_response",
    "validate",
]
