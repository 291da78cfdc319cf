"""The source's and the sink's errors: each names the option, column, topic or range it
is about."""

from __future__ import annotations

import logging

from msgclient.errors import InvalidConfigurationError, MsgClientError

log = logging.getLogger("msgclient.spark")


class SourceOptionError(InvalidConfigurationError):
    """An option of ``spark.read.format("msgclient")`` is missing, unknown or malformed."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"msgclient source option {option!r}: {problem}")
        self.option = option
        self.problem = problem


class SinkOptionError(InvalidConfigurationError):
    """An option of ``df.write.format("msgclient")`` is missing, unknown or malformed, or
    a column of the DataFrame written has a type the sink cannot write."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"msgclient sink option {option!r}: {problem}")
        self.option = option
        self.problem = problem


class DataLossError(MsgClientError):
    """Messages a query planned to read are gone (deleted, expired, topic recreated).

    Raised only with ``failOnDataLoss=true`` (the default); with ``false`` the source logs a
    warning and reads what is left.
    """


def report_data_loss(fail: bool, problem: str) -> None:
    """Raise (``failOnDataLoss=true``) or log and go on, as Spark's Kafka source does."""
    if fail:
        raise DataLossError(
            f"{problem}. Some data may have been lost (failOnDataLoss=true; with "
            "failOnDataLoss=false the query logs this and reads on)"
        )
    log.warning("%s; failOnDataLoss=false: reading on without it", problem)
