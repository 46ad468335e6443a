"""The API's errors: an HTTP status and a Kafka error code, answered as JSON."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.protocol import error_codes


class ApiError(Exception):
    """Answered as ``{"error_code": N, "message": "..."}`` with ``status``."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        #: Kafka's error name (``UNKNOWN_TOPIC_OR_PARTITION``); its code is answered.
        self.error = error
        self.message = message
        self.headers = dict(headers or {})

    @property
    def error_code(self) -> int:
        """Kafka's code for :attr:`error`."""
        return error_codes.code_for(self.error)

    def body(self) -> dict[str, object]:
        """The JSON body."""
        return {"error_code": self.error_code, "message": self.message}


def bad_request(message: str) -> ApiError:
    """400: a parameter is missing, unknown or malformed."""
    return ApiError(400, "INVALID_REQUEST", message)


def unknown_topic(topic: str, partition: int | None = None) -> ApiError:
    """404: no such topic (or partition)."""
    if partition is None:
        return ApiError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic '{topic}' does not exist")
    return ApiError(
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
        f"topic '{topic}' has no partition {partition}",
    )
