"""Log lines that say which producer wrote them, and a rate limit for repeated ones.

Every component of a producer logs through a :class:`ClientLogger`: each
message starts with ``[client-id]`` and the record carries ``client_id`` (and,
where one is involved, ``broker`` and ``partition``) as attributes, so a log
pipeline can filter on them without parsing text. Brokers are named
``broker <id> (<host>:<port>)`` and partitions ``<topic>-<partition>``.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

__all__ = ["ClientLogger", "RateLimiter"]

if TYPE_CHECKING:
    _Adapter = logging.LoggerAdapter[logging.Logger]
else:  # LoggerAdapter is subscriptable only from Python 3.11
    _Adapter = logging.LoggerAdapter


class ClientLogger(_Adapter):
    """Prefixes messages with ``[client_id]`` and adds ``client_id`` to each record."""

    def __init__(self, logger: logging.Logger, client_id: str) -> None:
        super().__init__(logger, {"client_id": client_id})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        extra = dict(self.extra or {})
        extra.update(kwargs.get("extra") or {})
        kwargs["extra"] = extra
        return f"[{extra['client_id']}] {msg}", kwargs


class RateLimiter:
    """Lets one event per ``interval`` seconds through for each key; counts the rest.

    ``allow(key, now)`` returns None when the event should stay quiet, else
    how many were suppressed since the last one let through.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[Any, float] = {}
        self._suppressed: dict[Any, int] = {}

    def __len__(self) -> int:
        """How many keys it remembers."""
        return len(self._last)

    def allow(self, key: Any, now: float) -> int | None:
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._suppressed.pop(key, 0)
