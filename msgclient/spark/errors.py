"""The source's errors: each names the option, topic or range it is about."""

from __future__ import annotations

from msgclient.errors import InvalidConfigurationError, MsgClientError


class SourceOptionError(InvalidConfigurationError):
    """An option of ``spark.read.format("msgclient")`` is missing, unknown or malformed."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"msgclient source option {option!r}: {problem}")
        self.option = option


class DataLossError(MsgClientError):
    """Messages a query planned to read are gone (deleted, expired, topic recreated).

    Raised only with ``failOnDataLoss=true`` (the default); with ``false`` the source logs a
    warning and reads what is left.
    """
