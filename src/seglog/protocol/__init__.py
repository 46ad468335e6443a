"""The Kafka wire protocol without I/O: bytes in, dicts out, and back."""

from seglog.protocol.api_keys import ApiKey, description, supported_range
from seglog.protocol.errors import DecodeError, FrameTooLargeError, UnsupportedVersionError
from seglog.protocol.framing import FrameBuffer, frame
from seglog.protocol.headers import (
    Request,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

__all__ = [
    "ApiKey",
    "DecodeError",
    "FrameBuffer",
    "FrameTooLargeError",
    "Request",
    "RequestHeader",
    "UnsupportedVersionError",
    "decode_request",
    "decode_response",
    "description",
    "encode_request",
    "encode_response",
    "frame",
    "supported_range",
]
