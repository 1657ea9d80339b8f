"""Keep an expiring token fresh ahead of time (Java's ``ExpiringCredentialRefreshingLogin``).

A :class:`RefreshingToken` fetches a token once, then refreshes it in the
background when a share of its lifetime has passed, so that whoever asks for
it (a KIP-368 re-authentication, with the connection's writes held) gets the
token already fetched and never waits for the token endpoint:

* when: Java's rule (:func:`refresh_delay`): at ``window`` (0.8) of the
  lifetime plus up to ``jitter`` (0.05), but no later than ``buffer`` (300 s)
  before the expiry and no sooner than ``min_period`` (60 s) from now; both
  margins are dropped for a token too short-lived to honour them;
* a refresh that fails keeps the current token while it is valid: a WARNING,
  and another try after an exponential backoff (Java's
  ``sasl.login.retry.backoff.ms`` 100 ms up to ``.max.ms`` 10 s);
* only a caller with no valid token waits, for a fetch shared by all.

Background work is tied to the event loop of the latest caller;
:meth:`RefreshingToken.close` stops it (the next :meth:`~RefreshingToken.get`
starts it again).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from .. import errors

__all__ = ["RefreshingToken", "RefreshingTokenProvider", "refresh_delay"]

log = logging.getLogger("aioproducer.sasl")

Fetch = Callable[[], Awaitable[tuple[str, float]]]


def refresh_delay(
    lifetime: float,
    rand: float,
    *,
    window: float = 0.8,
    jitter: float = 0.05,
    min_period: float = 60.0,
    buffer: float = 300.0,
) -> float:
    """Seconds from now until a token living ``lifetime`` s more is refreshed (``rand`` in [0, 1)).

    ``ExpiringCredentialRefreshingLogin.refreshMs`` with the token starting now.
    """
    share = lifetime * (window + jitter * rand)
    if min_period + buffer > lifetime:
        # Too short-lived for both margins: refresh at the window alone.
        return share
    return max(min(share, lifetime - buffer), min_period)


class RefreshingToken:
    """A token from ``fetch()`` (returns ``(token, lifetime_s)``), refreshed ahead of expiry."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        describe: str,
        window: float = 0.8,
        jitter: float = 0.05,
        min_period: float = 60.0,
        buffer: float = 300.0,
        retry_backoff: float = 0.1,
        retry_backoff_max: float = 10.0,
    ) -> None:
        self._fetch_token = fetch
        self._describe = describe
        self._window, self._jitter = window, jitter
        self._min_period, self._buffer = min_period, buffer
        self._backoff = (retry_backoff, retry_backoff_max)
        self._token: str | None = None
        self._expires_at = 0.0  # loop time
        self._refresh_at = 0.0
        self._failures = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._fetching: asyncio.Task[None] | None = None
        #: Tokens fetched so far.
        self.fetches = 0

    def __repr__(self) -> str:
        state = "valid" if self._valid() else "none"
        return f"<RefreshingToken {self._describe} {state} fetches={self.fetches}>"

    async def get(self) -> str:
        """The current token; waits only when none is valid."""
        loop = self._adopt()
        now = loop.time()
        token = self._token
        if token is not None and now < self._expires_at:
            if now >= self._refresh_at:
                self._start_fetch()  # overdue: in the background, the token is still valid
            elif self._timer is None and self._fetching is None:
                self._arm(self._refresh_at - now)
            return token
        await asyncio.shield(self._start_fetch())
        assert self._token is not None
        return self._token

    def close(self) -> None:
        """Stop refreshing in the background (until the next :meth:`get`)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._fetching is not None:
            task, self._fetching = self._fetching, None
            try:
                task.cancel()
            except RuntimeError:  # its event loop is closed: nothing runs it any more
                pass

    def _valid(self) -> bool:
        return (
            self._token is not None
            and self._loop is not None
            and self._loop.time() < self._expires_at
        )

    def _adopt(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop: the old one's timer and task are not ours to wait for.
            self.close()
            if self._loop is not None and self._token is not None:
                # Loop clocks differ: carry the remaining lifetime over.
                remaining = self._expires_at - self._loop.time()
                refresh_in = self._refresh_at - self._loop.time()
                self._expires_at = loop.time() + remaining
                self._refresh_at = loop.time() + refresh_in
            self._loop = loop
        return loop

    def _arm(self, delay: float) -> None:
        assert self._loop is not None
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(max(0.0, delay), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._start_fetch()

    def _start_fetch(self) -> asyncio.Task[None]:
        if self._fetching is None:
            assert self._loop is not None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            task = self._loop.create_task(self._refresh(), name="aioproducer-token-refresh")
            # A failed background refresh is reported by _refresh; nobody may await it.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._fetching = task
        return self._fetching

    async def _refresh(self) -> None:
        assert self._loop is not None
        loop = self._loop
        try:
            started = loop.time()
            try:
                token, lifetime = await self._fetch_token()
            except errors.KafkaError as exc:
                self._failed(exc)
                raise
            self._token = token
            self._expires_at = started + lifetime
            delay = refresh_delay(
                lifetime,
                random.random(),
                window=self._window,
                jitter=self._jitter,
                min_period=self._min_period,
                buffer=self._buffer,
            )
            self._refresh_at = started + delay
            self._failures = 0
            self.fetches += 1
            self._arm(self._refresh_at - loop.time())
        finally:
            if self._fetching is asyncio.current_task():
                self._fetching = None

    def _failed(self, exc: errors.KafkaError) -> None:
        assert self._loop is not None
        self._failures += 1
        if not self._valid():
            return  # the callers waiting for a token get the error
        low, high = self._backoff
        remaining = self._expires_at - self._loop.time()
        delay = min(high, low * 2 ** (self._failures - 1), remaining) * random.uniform(0.8, 1.0)
        log.warning(
            "refreshing the token from %s failed (%s); the current token stays in use "
            "(valid %.1f s more), next attempt in %.1f s",
            self._describe,
            exc.message or exc,
            remaining,
            delay,
        )
        # Callers keep the current token until the retry, instead of each
        # starting a fetch of its own.
        self._refresh_at = self._loop.time() + delay
        self._arm(delay)


class RefreshingTokenProvider:
    """A ``sasl_oauth_token_provider`` whose token a :class:`RefreshingToken` keeps fresh.

    A subclass sets ``self._tokens`` in its constructor. The client's connections
    close such a provider when they close: its background refresh serves them
    (a later :meth:`token`, from another producer sharing it, starts it again).
    """

    _tokens: RefreshingToken

    @property
    def fetches(self) -> int:
        """How many tokens were fetched so far (for tests and metrics)."""
        return self._tokens.fetches

    async def token(self) -> str:
        """A valid token: the cached one (refreshed in the background), else a fresh one."""
        return await self._tokens.get()

    def close(self) -> None:
        """Stop the background refresh (a later :meth:`token` starts it again)."""
        self._tokens.close()
