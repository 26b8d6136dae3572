"""How each pipeline is invoked (sharesync, the peer, the limit) and the run directories it works in."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from bench.measure import PYTHON, SHARESYNC

# --engine spark: the Spark Connect URL of the run's one Apache Spark server (None: embedded Sail);
# set by ``bench.scenarios.Bench.run`` once the server is up.
REMOTE: str | None = None


def write_config(
    directory: Path,
    profile: Path,
    tables: list[str],
    *,
    max_versions: int | None = None,
    mode: str = "merge",
    embedded: bool = False,
) -> Path:
    """``embedded``: Sail inside the process even with ``--engine spark`` (the ``sail`` pipeline)."""
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "profile": str(profile),
        "state_store": f"sqlite:///{directory / 'state.db'}",
        "staging_dir": str(directory / "staging"),
        "tables": [
            {"name": name, "target": str(directory / ("target" if len(tables) == 1 else f"target-{i}")),
             "keys": ["id"], "mode": mode}
            for i, name in enumerate(tables)
        ],
    }  # fmt: skip
    if max_versions is not None:
        config["defaults"] = {"max_versions_per_batch": max_versions}
    if REMOTE is not None and not embedded:
        config["spark"] = {"remote": REMOTE}
    path = directory / "sharesync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def sharesync_argv(config: Path) -> list[str]:
    return [SHARESYNC, "--config", str(config), "sync"]


def peer_argv(profile: Path, table: str, target: Path, *args: str, delta_format: bool = False) -> list[str]:
    """``delta_format``: the table needs the delta response format (deletion vectors). With
    ``--engine spark`` the peer is ``bench.spark_peer`` on the same Spark server."""
    module = ["bench.peer"] if REMOTE is None else ["bench.spark_peer", "--remote", REMOTE]
    return [PYTHON, "-m", *module, "--profile", str(profile), "--table", table, "--target", str(target),
            *(["--delta-format"] if delta_format else []), *args]  # fmt: skip


def limit_argv(profile: Path, table: str, *args: str, delta_format: bool = False) -> list[str]:
    return [PYTHON, "-m", "bench.limit", "--profile", str(profile), "--table", table,
            *(["--delta-format"] if delta_format else []), *args]  # fmt: skip


def restore(seed: Path, directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(seed, directory, symlinks=True)


def remove(*paths: Path) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def sharesync_bootstrap(
    base: Path, profile: Path, table: str, *, embedded: bool = False
) -> tuple[Path, Callable[[], None]]:
    """A bootstrap run directory: its config, and what makes it fresh before every run."""
    directory = base / ("sail-boot" if embedded else "ss-boot")
    config = write_config(directory, profile, [table], embedded=embedded)
    return config, lambda: remove(directory / "target", directory / "staging", directory / "state.db")

