"""Errors of the protocol layer: frames and messages that cannot be decoded."""

from __future__ import annotations

from seglog.errors import SeglogError


class DecodeError(SeglogError):
    """Bytes that are not a valid message of the expected API and version."""

    kafka_error = "INVALID_REQUEST"


class FrameTooLargeError(DecodeError):
    """A size prefix above ``socket.request.max.bytes`` (or negative)."""


class UnsupportedVersionError(DecodeError):
    """A request for an API key or version this broker does not implement."""

    kafka_error = "UNSUPPORTED_VERSION"

    def __init__(self, message: str, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
