"""Errors of the protocol layer: frames and messages that cannot be decoded or encoded.

Every decoding failure, whatever its cause (truncation, an impossible length,
invalid UTF-8, null in a non-nullable field), is a :class:`DecodeError`; a
broker may catch that one class around ``decode_request`` and ``FrameBuffer``.
"""

from __future__ import annotations

from seglog.errors import SeglogError


class DecodeError(SeglogError):
    """Bytes that are not a valid frame or message of the expected API and version."""

    kafka_error = "INVALID_REQUEST"


class FrameTooLargeError(DecodeError):
    """A size prefix above the frame limit (``socket.request.max.bytes``) or negative."""

    def __init__(self, message: str, size: int = -1, limit: int = -1) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class UnsupportedVersionError(DecodeError):
    """A request for an API key or version that is not served.

    Carries what the broker needs to answer without a body: the API key, the
    version asked for, the correlation id and the client id.
    """

    kafka_error = "UNSUPPORTED_VERSION"

    def __init__(
        self,
        message: str,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class UnknownApiKeyError(UnsupportedVersionError):
    """A request whose API key is not known at all (Kafka closes the connection)."""

    kafka_error = "INVALID_REQUEST"


class EncodeError(SeglogError, ValueError):
    """A value that cannot be encoded at the requested version (a bug of the caller)."""


__all__ = [
    "DecodeError",
    "EncodeError",
    "FrameTooLargeError",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
]
