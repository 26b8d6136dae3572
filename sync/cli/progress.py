"""What ``sync`` and ``backfill`` draw on a terminal while tables sync (rich, imported on first use)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.progress import Progress, ProgressColumn, Task

    from sharesync.sync.protocol.download import ProgressCallback, ProgressUpdate


class Display:
    """Rich progress on a terminal: a row per table while it syncs, a bar per batch while it downloads.

    Nothing is drawn (or imported) until a table has something to do, so a pass with nothing
    new shows nothing; rows go when their table or download is done. Tables syncing in parallel
    call in from their own threads (rich's Progress takes its own lock).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bars: Progress | None = None

    def _progress(self) -> Progress:
        with self._lock:
            if self._bars is None:
                from rich.progress import (
                    BarColumn,
                    DownloadColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                    TransferSpeedColumn,
                )

                self._bars = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    _on_downloads(DownloadColumn()),
                    _on_downloads(TransferSpeedColumn()),
                    TimeElapsedColumn(),
                    transient=True,
                )
                self._bars.start()
            return self._bars

    @contextmanager
    def table(self, name: str) -> Iterator[None]:
        progress = self._progress()
        task = progress.add_task(f"{name}: syncing", total=None)
        try:
            yield
        finally:
            progress.remove_task(task)

    def download(self, label: str, files: int) -> ProgressCallback:
        progress = self._progress()
        task = progress.add_task(f"  {label}", total=None, download=True)
        done = False

        def update(event: ProgressUpdate) -> None:
            nonlocal done
            if done:
                return
            progress.advance(task, event.advance)
            if event.advance == 0 and event.files_done == event.files_total:  # the batch's last file is in
                done = True
                progress.remove_task(task)

        return update

    def stop(self) -> None:
        if self._bars is not None:
            self._bars.stop()


def _on_downloads(column: ProgressColumn) -> ProgressColumn:
    """``column`` on a download's row, blank on a table's row."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class OnDownloads(ProgressColumn):
        def render(self, task: Task) -> RenderableType:
            return column.render(task) if task.fields.get("download") else Text("")

    return OnDownloads()
