"""What a running sharing server holds: its settings, signer, clock, catalog, login and hooks.

Apart from the routes (:mod:`~sharesync.sync.server.app`) because the runner and tests build and
adjust it (move the clock, change a test double's faults) while the app serves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sharesync.sync.core.remote_table import Keys, KeySource
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.server.asyncqueries import AsyncQueries
from sharesync.sync.server.catalog import Catalog
from sharesync.sync.server.hooks import ServerHooks
from sharesync.sync.server.settings import ServerSettings
from sharesync.sync.server.signing import Signer
from sharesync.sync.server.tokens import Authenticator


@dataclass
class Clock:
    """Wall-clock milliseconds plus an offset tests can move forward instead of sleeping."""

    offset_ms: int = 0

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms

    def advance(self, seconds: float) -> None:
        self.offset_ms += int(seconds * 1000)


@dataclass
class ServerState:
    settings: ServerSettings
    signer: Signer
    clock: Clock = field(default_factory=Clock)
    queries: AsyncQueries = field(default_factory=AsyncQueries)
    keys: KeySource | None = None  # credentials for remote tables (None: the settings' own store of each)
    hooks: ServerHooks | None = None  # a test double's fault injection (None in production)

    def __post_init__(self) -> None:
        settings = self.settings
        given = self.keys
        keys = self._own_keys if given is None else (lambda _kind: given)
        self.catalog = Catalog(settings.root, settings.remote_tables, keys, settings.cache_dir)
        self.issued_credentials: list[tuple[str, ...]] = []  # the secrets of each credentials answer (tests)
        self.auth = Authenticator(
            self.settings.bearer_token,
            self.settings.oauth_client_id,
            self.settings.oauth_client_secret,
            self.settings.oauth_token_lifetime_seconds,
        )

    def _own_keys(self, kind: StoreKind) -> KeySource:
        store = self.settings.store_for(kind) or StoreSettings()
        return lambda: Keys(store)
