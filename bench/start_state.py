"""Start states for the incremental scenarios, and the check that every target equals the provider.

A start state is a run directory per pipeline synced (unmeasured) to the workload's start version
through a second, short-lived server whose copy of the table stops there (same table id and
files), plus a pristine copy (seed) that is copied back before every measured run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench import workload as wl
from bench.commands import peer_argv, remove, restore, sharesync_argv, write_config
from bench.measure import run_child
from bench.servers import Server, serving_root

# Peer targets wrong by construction, not by chance: their time is reported, their correctness is
# not checked (bench/README.md, "Deletion vectors"). Re-check when a delta-kernel-rust-sharing-wrapper
# built on delta_kernel >= 0.27 is on PyPI (tests/sync/delta/test_dv_change_feeds.py then fails).
PEER_WRONG_BY_CONSTRUCTION = {
    "dv-incremental": "the connector's DV change feeds come from delta_kernel 0.22.0, which applies a "
    "version's DV difference to the first 1,024-row batch of each file only (fixed in 0.27.0, delta-kernel-rs #3077)",
}


@dataclass(frozen=True)
class StartState:
    """Run directories at the workload's start version, and their pristine copies (seeds)."""

    config: Path  # sharesync's config (in ``sharesync``), profile: the measuring server
    sharesync: Path
    sharesync_seed: Path
    peer: Path
    peer_seed: Path
    sail_config: Path | None = None  # --engine spark: sharesync on embedded Sail, its own start state
    sail: Path | None = None
    sail_seed: Path | None = None

    def restore_sharesync(self) -> None:
        restore(self.sharesync_seed, self.sharesync)

    def restore_sail(self) -> None:
        assert self.sail is not None and self.sail_seed is not None
        restore(self.sail_seed, self.sail)

    def restore_peer(self) -> None:
        restore(self.peer_seed, self.peer)


def start_state(base: Path, w: wl.Workload, profile: Path, *, peer: bool = True,
                max_versions: int | None = None, sail: bool = False) -> StartState:  # fmt: skip
    """Sync sharesync (and the peer, and sharesync on Sail) to the start version through a server
    that stops there."""
    sail_dirs = {}
    if sail:
        sail_dirs = {"sail_config": write_config(base / "sail-inc", profile, [w.full_name], max_versions=max_versions,
                                                 embedded=True),
                     "sail": base / "sail-inc", "sail_seed": base / "sail-inc-seed"}  # fmt: skip
        remove(base / "sail-inc" / "target", base / "sail-inc" / "staging", base / "sail-inc" / "state.db")
    state = StartState(write_config(base / "ss-inc", profile, [w.full_name], max_versions=max_versions),
                       base / "ss-inc", base / "ss-inc-seed", base / "peer-inc", base / "peer-inc-seed",
                       **sail_dirs)  # fmt: skip
    remove(state.sharesync / "target", state.sharesync / "staging", state.sharesync / "state.db", state.peer)
    at_start = serving_root(base, "root-start", {w.name: wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name})
    server = Server(at_start, base, "start")
    try:
        run_child(sharesync_argv(state.config), log_to=base / "logs" / "setup-sharesync.log",
                  env={"SHARESYNC_PROFILE": str(server.profile)})  # fmt: skip
        if state.sail_config is not None:
            run_child(sharesync_argv(state.sail_config), log_to=base / "logs" / "setup-sail.log",
                      env={"SHARESYNC_PROFILE": str(server.profile)})  # fmt: skip
        if peer:
            state.peer.mkdir(parents=True)
            run_child(peer_argv(server.profile, w.full_name, state.peer / "target", "bootstrap",
                                delta_format=w.deletion_vectors),
                      log_to=base / "logs" / "setup-peer.log")  # fmt: skip
    finally:
        server.stop()
    restore(state.sharesync, state.sharesync_seed)
    if state.sail is not None and state.sail_seed is not None:
        restore(state.sail, state.sail_seed)
    if peer:
        restore(state.peer, state.peer_seed)
    return state


def verify(w: wl.Workload, targets: dict[str, Path | str], storage_options: dict[str, str] | None = None) -> None:
    """Every target equals the provider's table at its latest version: all columns, all rows."""
    from deltalake import DeltaTable

    from sharesync.pipelines.targets.delta.rows import read_rows

    expected = wl.provider_table(w)
    names = expected.column_names
    for pipeline, path in targets.items():
        got = (
            read_rows(DeltaTable(str(path), storage_options=storage_options), names)  # DV targets too
            .select(names)
            .cast(expected.schema)
            .sort_by("id")
        )
        if got.num_rows != expected.num_rows:
            raise SystemExit(f"{pipeline} target {path}: {got.num_rows:,} rows, the provider has {expected.num_rows:,}")
        differ = [n for n in names if not got.column(n).equals(expected.column(n))]
        if differ:
            raise SystemExit(f"{pipeline} target {path}: columns {differ} differ from the provider's")
