"""The ``history`` scenario (issue 14): one shape's incremental batch in history mode vs merge mode.

Both start from a target and checkpoint at the workload's start version, made once (unmeasured)
through a short-lived server whose copy of the table stops there — one start state per mode —
and copied back before every measured run. Then the same ``sharesync sync`` applies the same
change versions: merge mode nets them per key; history mode gives every version that changes a
key its own row (no netting), so it writes more rows by design. Runs alternate between the two
modes; the goal is history ≤ 1.5× merge in wall time and in peak RSS.

After the runs, the merge target must equal the provider's table at its latest version, and so
must the history target's current rows (``_sharesync_is_current``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench import workload as wl

if TYPE_CHECKING:
    from bench.scenarios import Bench

MODES = ("merge", "history")
GOAL = 1.5  # history mode's wall time and peak RSS, as a multiple of merge mode's


def scenario(bench: Bench, label: str, w: wl.Workload) -> None:
    from bench.commands import sharesync_argv
    from bench.measure import log

    log(f"{label}: history vs merge mode, v{w.start_version + 1}..v{w.latest_version} "
        f"({w.change_file_rows:,} change rows); setting up the start states …")  # fmt: skip
    states = start_states(bench.work / label, w, bench.server.profile, bench.args.max_versions)
    name = f"{label}-history"
    for run in range(bench.runs):
        for mode in MODES[run % 2 :] + MODES[: run % 2]:
            config, restore = states[mode]
            bench.measure(name, mode, sharesync_argv(config), before=restore, rows=w.change_file_rows)
    verify(w, states["merge"][0].parent / "target", states["history"][0].parent / "target")
    log(f"  {name}: targets verified (merge target and the history's current rows equal the provider)")


def start_states(
    base: Path, w: wl.Workload, profile: Path, max_versions: int | None
) -> dict[str, tuple[Path, Callable[[], None]]]:
    """Per mode: the config of a run directory synced to the start version, and its restorer."""
    from bench import run

    at_start = run.serving_root(base, "root-start-history", {w.name: wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name})
    server = run.Server(at_start, base, "start-history")
    states: dict[str, tuple[Path, Callable[[], None]]] = {}
    try:
        for mode in MODES:
            directory, seed = base / f"ss-{mode}-mode", base / f"ss-{mode}-mode-seed"
            run.remove(directory, seed)
            config = run.write_config(directory, profile, [w.full_name], max_versions=max_versions, mode=mode)
            run.run_child(run.sharesync_argv(config), log_to=base / "logs" / f"setup-{mode}-mode.log",
                          env={"SHARESYNC_PROFILE": str(server.profile)})  # fmt: skip
            run.restore(directory, seed)
            states[mode] = (config, lambda seed=seed, directory=directory: run.restore(seed, directory))
    finally:
        server.stop()
    return states


def verify(w: wl.Workload, merge_target: Path, history_target: Path) -> None:
    """The merge target, and the history target's current rows, equal the provider at its latest version."""
    from deltalake import DeltaTable

    from bench.start_state import verify as verify_merge
    from sharesync.pipelines.targets.delta.rows import read_rows

    verify_merge(w, {"merge": merge_target})
    expected = wl.provider_table(w)
    names = expected.column_names
    # through QueryBuilder: sharesync's targets hold deletion vectors
    current = read_rows(DeltaTable(str(history_target)), names, '"_sharesync_is_current"')
    got = current.select(names).cast(expected.schema).sort_by("id")
    if got.num_rows != expected.num_rows or any(not got.column(n).equals(expected.column(n)) for n in names):
        raise SystemExit(f"history target {history_target}: its current rows differ from the provider's table")


def goals(get: Callable[[str, str], float | None], labels: list[str]) -> list[tuple[str, float | None, float]]:
    """(name, history ÷ merge, bound) per shape and measure, for the goal list."""
    out = []
    for label in labels:
        for field_, what in (("wall", "wall"), ("maxrss_mib", "peak RSS")):
            mine, merge = get(f"{label}-history/history", field_), get(f"{label}-history/merge", field_)
            out.append((f"{label}-history: {what} vs merge mode", mine / merge if mine is not None and merge else None,
                        GOAL))  # fmt: skip
    return out
