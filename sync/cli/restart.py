"""``sync --every``'s restart policy: when a long-lived process must not run its next pass.

Apart from the pass loop (:mod:`sharesync.sync.cli.repeat`) because it is a decision about one
pass's config and this process's memory, tested without running passes.
"""

from __future__ import annotations

import click

from sharesync.sync.cli.repeat import RestartProcess, resident_mib
from sharesync.sync.core.config import SharesyncConfig
from sharesync.sync.core.storage import StorageSection


def restart_if_due(
    number: int, config: SharesyncConfig, storage: StorageSection | None, max_rss_mib: int, *, first_here: int
) -> None:
    """Raise :class:`RestartProcess` before pass ``number`` when this process should not run it."""
    if storage is not None and config.storage != storage:
        raise RestartProcess(
            number - 1, "the config's storage settings changed; the engine keeps the ones it started with"
        )
    resident = resident_mib() if max_rss_mib > 0 else None
    if resident is None or resident <= max_rss_mib:
        return
    if number == first_here + 1 and first_here > 1:  # a fresh process was above the bound after one pass
        click.echo(
            f"warning: --max-rss-mib {max_rss_mib} is below what one pass leaves in a fresh process "
            f"({resident:.0f} MiB): every pass restarts the process; raise the bound",
            err=True,
        )
    raise RestartProcess(number - 1, f"{resident:.0f} MiB resident, above --max-rss-mib {max_rss_mib}")
