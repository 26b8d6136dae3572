"""The benchmark's scenarios (bench/README.md): each pipeline measured per workload shape.

* ``bootstrap``   — fresh target and state; sync the latest snapshot.
* ``incremental`` — from a target and checkpoint at the version before the change versions
  (:mod:`bench.start_state`), copied back before every run.
* ``warm``        — the incremental batch as the second pass of one process (``bench.probe warm``).
* ``noop``        — ``sharesync sync`` when nothing is new, and the in-process ``sync_all()``.
* ``poll``        — ``Syncer.source_versions()`` over many configured tables (``bench.probe poll``).
* ``history``     — the incremental batch in history mode vs merge mode (:mod:`bench.history`).

Runs are interleaved (the pipeline order rotates per run) so load from elsewhere hits all of
them alike. After each scenario the targets must equal the provider's table.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bench import commands, report
from bench import workload as wl
from bench.batch_writes import batch_writes, version_of
from bench.commands import limit_argv, peer_argv, remove, sharesync_argv, sharesync_bootstrap, write_config
from bench.measure import PYTHON, log, rss_floor, run_child
from bench.servers import EngineSampler, Server, SparkServer, serving_root
from bench.start_state import PEER_WRONG_BY_CONSTRUCTION, StartState, start_state, verify

PIPELINES = ("sharesync", "peer", "limit", "sail")  # sail: sharesync on embedded Sail, with --engine spark
SCENARIOS = ("bootstrap", "incremental", "warm", "noop", "poll", "history")


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.runs = args.runs
        self.results: dict[str, dict] = {}
        self.phases: dict[str, dict] = {}
        self.findings: list[str] = []  # what went wrong with a pipeline that is not sharesync
        self.spark: SparkServer | None = None  # --engine spark: the run's Spark Connect server

    def measure(self, scenario: str, pipeline: str, argv: list[str], *, before: Callable[[], None] | None = None,
                env: dict[str, str] | None = None, rows: int | None = None,
                after: Callable[[], dict[str, float]] | None = None) -> None:  # fmt: skip
        key = f"{scenario}/{pipeline}"
        entry = self.results.setdefault(key, {"scenario": scenario, "pipeline": pipeline, "rows": rows, "runs": []})
        if before is not None:
            before()
        index = len(entry["runs"]) + 1
        sampler = EngineSampler(self.spark) if self.spark is not None else None
        m = run_child(argv, log_to=self.work / "logs" / f"{scenario}-{pipeline}-{index}.log", env=env,
                      server_pid=self.server.pid)  # fmt: skip
        if sampler is not None:
            m.engine_rss_mib, m.engine_cpu = sampler.stop()
        entry["runs"].append(asdict(m) | (after() if after is not None else {}))
        engine = f"  spark {m.engine_rss_mib:6.0f} MiB cpu {m.engine_cpu:5.1f} s" if sampler is not None else ""
        log(f"  {key:<36} run {index}: {m.wall:7.2f} s  {m.maxrss_mib:8.0f} MiB  cpu {m.cpu:6.1f} s"
            f"  server cpu {m.server_cpu:5.1f} s{engine}  load {m.load:4.1f}")  # fmt: skip

    def interleaved(self, scenario: str, jobs: dict[str, tuple]) -> None:
        """Each pipeline ``runs`` times, the order rotating per run."""
        names = [p for p in PIPELINES if p in jobs and p in self.args.pipelines]
        for run in range(self.runs):
            for name in names[run % len(names) :] + names[: run % len(names)]:
                argv, before, rows, *after = jobs[name]
                self.measure(scenario, name, argv, before=before, rows=rows, after=after[0] if after else None)

    def breakdown(self, scenario: str, config: Path, prepare: Callable[[], None]) -> None:
        """With ``--phases``: one instrumented sharesync run of the scenario (not in the medians)."""
        if self.args.phases and "sharesync" in self.args.pipelines:
            from bench import phases

            self.phases[scenario] = phases.instrumented(config, prepare, self.work / "logs" / f"{scenario}-phases.log",
                                                        self.server.pid)  # fmt: skip

    def shape(self, label: str, w: wl.Workload) -> None:
        if "bootstrap" in self.args.scenarios:
            self.bootstrap(label, w)
        if {"incremental", "warm", "noop"} & set(self.args.scenarios):
            self.from_start_state(label, w)
        if "history" in self.args.scenarios and "sharesync" in self.args.pipelines:
            from bench import history

            history.scenario(self, label, w)

    def bootstrap(self, label: str, w: wl.Workload) -> None:
        table, base, profile = w.full_name, self.work / label, self.server.profile
        dv = w.deletion_vectors  # both other pipelines must ask for the delta response format
        log(f"{label}: bootstrap of {w.live_rows:,} rows (v{w.latest_version})")
        config, fresh_ss = sharesync_bootstrap(base, profile, table)
        peer_dir = base / "peer-boot"

        def fresh_peer() -> None:
            remove(peer_dir)
            peer_dir.mkdir(parents=True)

        sail_config, fresh_sail = sharesync_bootstrap(base, profile, table, embedded=True)
        jobs = {
            "sharesync": (sharesync_argv(config), fresh_ss, w.live_rows),
            "sail": (sharesync_argv(sail_config), fresh_sail, w.live_rows),
            "peer": (peer_argv(profile, table, peer_dir / "target", "bootstrap", delta_format=dv), fresh_peer,
                     w.live_rows),
            "limit": (limit_argv(profile, table, "snapshot", delta_format=dv), None, w.live_rows),
        }  # fmt: skip
        if not self.with_sail:
            del jobs["sail"]
        self.interleaved(f"{label}-bootstrap", jobs)
        self.verify(f"{label}-bootstrap", w, config.parent / "target", peer_dir / "target")
        if self.with_sail:
            verify(w, {"sail": sail_config.parent / "target"})
        self.breakdown(f"{label}-bootstrap", config, fresh_ss)

    def from_start_state(self, label: str, w: wl.Workload) -> None:
        """incremental, warm and noop: all start from the target and checkpoint at the start version."""
        log(f"{label}: incremental v{w.start_version + 1}..v{w.latest_version} "
            f"({w.versions} versions, {w.change_file_rows:,} change rows); setting up the start state …")  # fmt: skip
        state = start_state(
            self.work / label,
            w,
            self.server.profile,
            peer="peer" in self.args.pipelines,
            max_versions=self.args.max_versions,
            sail=self.with_sail,
        )
        if "incremental" in self.args.scenarios:
            self.incremental(label, w, state)
        if "warm" in self.args.scenarios and "sharesync" in self.args.pipelines:
            self.warm(label, w, state)
        if "noop" in self.args.scenarios:  # needs an up-to-date state
            run_child(sharesync_argv(state.config), log_to=self.work / "logs" / f"{label}-setup-noop.log")
            self.noop(label, state.config)

    def incremental(self, label: str, w: wl.Workload, state: StartState) -> None:
        table, profile, dv = w.full_name, self.server.profile, w.deletion_vectors
        changes = ("changes", "--from", str(w.start_version + 1), "--to", str(w.latest_version))
        target = state.sharesync / "target"
        since = [0]

        def restore() -> None:
            state.restore_sharesync()
            since[0] = version_of(target)

        jobs = {
            "sharesync": (sharesync_argv(state.config), restore, w.change_file_rows,
                          lambda: batch_writes(target, since[0])),
            "peer": (peer_argv(profile, table, state.peer / "target", "incremental", delta_format=dv),
                     state.restore_peer,
                     w.change_file_rows),
            "limit": (limit_argv(profile, table, *changes, delta_format=dv), None, w.change_file_rows),
        }  # fmt: skip
        if state.sail_config is not None:
            jobs["sail"] = (sharesync_argv(state.sail_config), state.restore_sail, w.change_file_rows)
        self.interleaved(f"{label}-incremental", jobs)
        self.verify(f"{label}-incremental", w, state.sharesync / "target", state.peer / "target")
        if state.sail is not None:
            verify(w, {"sail": state.sail / "target"})
        self.breakdown(f"{label}-incremental", state.config, state.restore_sharesync)

    @property
    def with_sail(self) -> bool:
        """``--engine spark`` with the ``sail`` pipeline: sharesync on embedded Sail in the same runs."""
        return self.spark is not None and "sail" in self.args.pipelines

    def verify(self, scenario: str, w: wl.Workload, ss_target: Path, peer_target: Path) -> None:
        """sharesync's target must equal the provider (or the bench stops); a wrong peer target is
        reported as a finding instead, with its timings kept: the peer is not ours to fix."""
        verify(w, {"sharesync": ss_target} if "sharesync" in self.args.pipelines else {})
        if "peer" in self.args.pipelines and scenario in PEER_WRONG_BY_CONSTRUCTION:
            self.findings.append(f"- {scenario}: the peer's target is wrong by construction, not checked (time "
                                 f"reported, correctness not): {PEER_WRONG_BY_CONSTRUCTION[scenario]}")  # fmt: skip
            log(f"  {scenario}: sharesync's target verified; the peer's target is wrong by construction, not checked")
            return
        if "peer" in self.args.pipelines:
            try:
                verify(w, {"peer": peer_target})
            except SystemExit as wrong:
                self.findings.append(f"- {scenario}: the peer's target is WRONG: {wrong}")
                log(f"  {scenario}: {self.findings[-1][2:]}")
                return
        log(f"  {scenario}: targets verified (equal to the provider at v{w.latest_version}, {w.live_rows:,} rows)")

    def warm(self, label: str, w: wl.Workload, state: StartState) -> None:
        log(f"{label}: the incremental batch as the second pass of a running process")
        warmup, fresh_warmup = sharesync_bootstrap(self.work / label, self.server.profile, w.full_name)

        def fresh() -> None:
            state.restore_sharesync()
            fresh_warmup()

        argv = [PYTHON, "-m", "bench.probe", "warm", "--config", str(state.config), "--warmup", str(warmup)]
        for _ in range(self.runs):
            self.measure(f"{label}-warm", "probe", argv, before=fresh, rows=w.change_file_rows)
        verify(w, {"sharesync": state.sharesync / "target"})

    def noop(self, label: str, config: Path) -> None:
        log(f"{label}: no-op sync (nothing new)")
        for _ in range(max(self.runs, 5)):
            self.measure(f"{label}-noop", "sharesync", sharesync_argv(config))
        self.measure(f"{label}-noop", "probe", [PYTHON, "-m", "bench.probe", "noop", "--config", str(config)])

    def poll(self) -> None:
        wl.build_poll_tables(self.args.poll_tables, log=log)
        names = [f"poll.s.{wl.poll_table(i)}" for i in range(self.args.poll_tables)]
        config = write_config(self.work / "poll", self.server.profile, names)
        log(f"polling {len(names)} tables' versions")
        for _ in range(self.runs):
            self.measure(
                "poll", "probe", [PYTHON, "-m", "bench.probe", "poll", "--config", str(config), "--repeat", "2"]
            )

    def run(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        workloads = {label: wl.build(wl.SHAPES[label].scaled(self.args.scale), self.args.seed, log=log)
                     for label in self.args.shape}  # fmt: skip
        poll_root = wl.build_poll_tables(self.args.poll_tables, log=log) if "poll" in self.args.scenarios else None
        root = serving_root(self.work, "root", {w.name: w.table_path for w in workloads.values()},
                            {"poll": poll_root / "poll"} if poll_root else None)  # fmt: skip
        self.server = Server(root, self.work, "main")
        log(f"sharing server pid {self.server.pid}: {json.loads(self.server.profile.read_text())['endpoint']}")
        if self.args.engine == "spark":
            log("starting the Apache Spark Connect server (deploy/spark/run.sh connect) …")
            try:
                self.spark = SparkServer(self.work, self.args.spark_conf)
            except BaseException:
                self.server.stop()
                raise
            commands.REMOTE = self.spark.remote
            log(f"Spark Connect server pid {self.spark.pid}: {self.spark.remote}, {self.spark.rss_kib() / 1024:.0f} MiB")
        self.floor = rss_floor(self.work)
        log(f"RSS floor of the launcher (a /bin/true child): {self.floor:.1f} MiB")
        started = time.time()
        try:
            for label, w in workloads.items():
                self.shape(label, w)
            if "poll" in self.args.scenarios:
                self.poll()
        finally:
            self.server.stop()
            if self.spark is not None:
                self.spark.stop()
        report.write(self, workloads, time.time() - started)

    # -- results
