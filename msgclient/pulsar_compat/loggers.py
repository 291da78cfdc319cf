"""The official client's loggers, mapped onto Python's ``logging``.

msgclient logs through the ``msgclient`` and ``protocols`` loggers. ``Client(logger=...)``
routes them: a ``logging.Logger`` receives every record (as the official client forwards
its C++ log lines to it); ``ConsoleLogger`` writes to standard output and ``FileLogger`` to
a file, each from its level up. As in the official client, where logs go is a setting of
the process: the last client made with a ``logger`` decides. Without one, nothing is
changed and Python's logging configuration applies (the official client would print INFO
lines to standard output).
"""

from __future__ import annotations

import logging
import sys

from msgclient.pulsar_compat.arguments import check_type
from msgclient.pulsar_compat.enums import LoggerLevel

SOURCES = ("msgclient", "protocols")  # the loggers msgclient writes to

_LEVELS = {
    LoggerLevel.Debug: logging.DEBUG,
    LoggerLevel.Info: logging.INFO,
    LoggerLevel.Warn: logging.WARNING,
    LoggerLevel.Error: logging.ERROR,
}
# The official client's line layout: time, level, thread, source, message.
_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-5s [%(thread)d] %(name)s | %(message)s"
_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


class ConsoleLogger:
    """Log to standard output from ``log_level`` up."""

    def __init__(self, log_level: LoggerLevel = LoggerLevel.Info) -> None:
        check_type(LoggerLevel, log_level, "log_level")
        self.log_level = log_level


class FileLogger:
    """Log to ``log_file`` (appended) from ``log_level`` up."""

    def __init__(self, log_level: LoggerLevel, log_file: str) -> None:
        check_type(LoggerLevel, log_level, "log_level")
        check_type(str, log_file, "log_file")
        self.log_level = log_level
        self.log_file = log_file


class _Forward(logging.Handler):
    """Hands records to a user's logger, as if logged there."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__()
        self._target = target

    def emit(self, record: logging.LogRecord) -> None:
        if self._target.isEnabledFor(record.levelno):
            self._target.handle(record)


def route_logs(logger: logging.Logger | ConsoleLogger | FileLogger | None) -> None:
    """Send msgclient's logs where ``Client(logger=...)`` says (None: leave them be)."""
    if logger is None:
        return
    handler: logging.Handler
    if isinstance(logger, logging.Logger):
        handler, level = _Forward(logger), logger.getEffectiveLevel()
    elif isinstance(logger, ConsoleLogger):
        handler, level = logging.StreamHandler(sys.stdout), _LEVELS[logger.log_level]
    elif isinstance(logger, FileLogger):
        handler, level = logging.FileHandler(logger.log_file), _LEVELS[logger.log_level]
    else:
        raise ValueError(
            "Logger is expected to be either None, logger.Logger, pulsar.ConsoleLogger or "
            "pulsar.FileLogger"
        )
    handler.setFormatter(logging.Formatter(_FORMAT, _DATE_FORMAT))
    marked = _mark(handler)
    for name in SOURCES:
        source = logging.getLogger(name)
        for old in [h for h in source.handlers if getattr(h, "_pulsar_compat", False)]:
            source.removeHandler(old)
            old.close()
        source.addHandler(marked)
        source.setLevel(level)
        source.propagate = False  # only where the client's logger says, as the official


def _mark(handler: logging.Handler) -> logging.Handler:
    """Mark the handler this module installs, so that the next client replaces it."""
    handler._pulsar_compat = True  # type: ignore[attr-defined]
    return handler
