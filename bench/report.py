"""The benchmark's report: medians per scenario and pipeline, ratios, notes and the goals' verdicts.

Written to stdout and as ``<results>/<stamp>.json`` / ``.md`` (default ``bench/results``, gitignored).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from bench import workload as wl
from bench.batch_writes import WRITE_FIELDS
from bench.goals import check_goals, ratio_cell
from bench.measure import REPO, log
from bench.start_state import PEER_WRONG_BY_CONSTRUCTION

if TYPE_CHECKING:
    from bench.scenarios import Bench


def summarize(bench: Bench) -> dict[str, dict]:
    out = {}
    for key, entry in bench.results.items():
        runs = entry["runs"]
        med = {k: statistics.median(r.get(k, 0.0) for r in runs)
               for k in ("wall", "maxrss_mib", "cpu", "server_cpu", "engine_rss_mib", "engine_cpu")}  # fmt: skip
        med["total_rss_mib"] = statistics.median(r["maxrss_mib"] + r.get("engine_rss_mib", 0.0) for r in runs)
        med["total_cpu"] = statistics.median(r["cpu"] + r.get("engine_cpu", 0.0) for r in runs)  # + a Spark server's
        med |= {k: statistics.median(r[k] for r in runs) for k in WRITE_FIELDS if all(k in r for r in runs)}
        rows = entry.get("rows")
        out[key] = {**med, "n": len(runs), "rows": rows, "rows_per_s": rows / med["wall"] if rows else None}
        if entry["pipeline"] == "probe":
            outputs = [r["output"] for r in runs]
            out[key]["probe"] = outputs[-1]
            for field_ in ("first_call_seconds", "warm_call_seconds", "warm_pass_seconds", "warmup_seconds"):
                values = [o.get(field_) for o in outputs if o.get(field_) is not None]
                if values:
                    out[key][field_] = statistics.median(values)
        else:
            timings = [r["output"].get("timings") for r in runs if r["output"].get("timings")]
            if timings:
                out[key]["timings"] = {k: statistics.median(t.get(k, 0.0) for t in timings) for k in timings[0]}
    return out

def write(bench: Bench, workloads: dict[str, wl.Workload], seconds: float) -> None:
    """The run's report: on stdout, and as ``<results>/<stamp>.json`` / ``.md``."""
    summary = summarize(bench)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "sync", "pipelines", "state"],
                                capture_output=True, text=True, cwd=REPO).stdout.strip())  # fmt: skip
    machine = f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    header = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit + ("+dirty" if dirty else ""),
        "machine": machine, "python": platform.python_version(), "runs": bench.runs, "seconds": round(seconds),
        "scale": bench.args.scale, "rss_floor_mib": round(bench.floor, 1), "load_avg_end": os.getloadavg(),
        "workloads": {k: {**asdict(w), "root": str(w.root)} for k, w in workloads.items()},
    }  # fmt: skip
    goals = check_goals(bench, summary, list(workloads))
    reduced = (f"REDUCED SCALE (--scale {bench.args.scale}): rows and changed keys × {bench.args.scale}; "
               "the figures test the harness and are not comparable with full runs\n"
               if bench.args.scale != 1 else "")  # fmt: skip
    text = "\n".join([
        f"{reduced}sharesync benchmark — {header['date']}, commit {header['commit']}, {machine}, "
        f"median of {bench.runs} run(s), {round(seconds)} s; RSS floor {bench.floor:.0f} MiB; "
        f"1-min load average at the end {os.getloadavg()[0]:.1f}", "",
        *table(summary), "", *by_shape(summary, workloads), "", *size_curve(summary, workloads),
        *spark_table(bench, summary),
        *notes(bench, summary, workloads),
        *bench.findings, "", "Goals (issue 16):", *goals,
    ])  # fmt: skip
    print("\n" + text, flush=True)
    results = Path(bench.args.results)
    results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + (f"-scale{bench.args.scale:g}" if bench.args.scale != 1 else "")
    (results / f"{stamp}.json").write_text(json.dumps(
        {**header, "summary": summary, "raw": bench.results, "phases": bench.phases, "goals": goals,
         "findings": bench.findings},
        indent=2, default=str))  # fmt: skip
    (results / f"{stamp}.md").write_text(text + "\n")
    log(f"results: {results / stamp}.json / .md")

def table(summary: dict) -> list[str]:
    lines = ["| scenario | pipeline | wall s | peak RSS MiB | CPU s | server CPU s | rows/s | × peer wall | × peer RSS | × peer CPU | × limit wall |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for key, s in summary.items():
        scenario, pipeline = key.split("/")
        peer, limit = summary.get(f"{scenario}/peer"), summary.get(f"{scenario}/limit")
        if pipeline != "sharesync":
            peer = limit = None
        if pipeline == "peer" and scenario in PEER_WRONG_BY_CONSTRUCTION:
            pipeline = "peer (target wrong by construction)"
        rate = f"{s['rows_per_s']:,.0f}" if s.get("rows_per_s") else "–"
        lines.append(
            f"| {scenario} | {pipeline} | {s['wall']:.2f} | {s['maxrss_mib']:.0f} | {s['cpu']:.1f} | "
            f"{s['server_cpu']:.1f} | {rate} | {ratio_cell(s, peer, 'wall')} | {ratio_cell(s, peer, 'maxrss_mib')} | "
            f"{ratio_cell(s, peer, 'cpu')} | {ratio_cell(s, limit, 'wall')} |"
        )
    return lines

def spark_table(bench: Bench, summary: dict) -> list[str]:
    """--engine spark: sharesync on Spark vs the Spark peer (wall; memory = client + Spark server)
    and vs sharesync on embedded Sail (issue 29 §5's goals: ≤ 0.5× wall, ≤ 0.7× memory)."""
    if bench.spark is None:
        return []
    lines = ["Apache Spark engine (memory = the client process's peak RSS + the Spark server's peak VmRSS "
             "sampled during the run):", "",
             "| scenario | sharesync on Spark s | client+Spark MiB | Spark peer s | client+Spark MiB | × peer wall "
             "| × peer memory | sharesync on Sail s | Sail MiB | Spark / Sail wall |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    scenarios = dict.fromkeys(key.split("/")[0] for key in summary if key.endswith("/sharesync"))
    for scenario in scenarios:
        ss, peer, sail = (summary.get(f"{scenario}/{p}") for p in ("sharesync", "peer", "sail"))

        def cell(x: dict | None, field_: str, fmt: str = "{:.2f}") -> str:
            return fmt.format(x[field_]) if x else "–"

        lines.append(
            f"| {scenario} | {cell(ss, 'wall')} | {cell(ss, 'total_rss_mib', '{:,.0f}')} | {cell(peer, 'wall')} | "
            f"{cell(peer, 'total_rss_mib', '{:,.0f}')} | {ratio_cell(ss, peer, 'wall')} | "
            f"{ratio_cell(ss, peer, 'total_rss_mib')} | {cell(sail, 'wall')} | {cell(sail, 'maxrss_mib', '{:,.0f}')} | "
            f"{ratio_cell(ss, sail, 'wall')} |"
        )
    return [*lines, ""]

def size_curve(summary: dict, workloads: dict[str, wl.Workload]) -> list[str]:
    """The XL shapes (issue 42): what one incremental batch cost and wrote, against xl-1m of its pattern."""
    labels = [label for label in workloads if label.startswith("xl-")]
    if not labels:
        return []
    lines = ["Size curve (sharesync; the batch's writes from the target's log, bench/batch_writes.py):", "",
             "| shape | rows | changed keys | incremental wall s | CPU s (+ Spark server) | peak RSS MiB | × 1m wall | × 1m CPU "
             "| rows written | files rewritten / target's | files marked (DV) | rows copied | compaction rows "
             "| bootstrap wall s | CPU s | peak RSS MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for label in labels:
        w, inc, boot = workloads[label], summary.get(f"{label}-incremental/sharesync"), summary.get(f"{label}-bootstrap/sharesync")
        base = summary.get(f"{one_million(label)}-incremental/sharesync")

        def f(x: dict | None, k: str, fmt: str = "{:.2f}") -> str:
            return fmt.format(x[k]) if x and k in x else "–"

        lines.append(
            f"| {label} | {w.rows:,} | {w.versions * w.change_rows:,} | {f(inc, 'wall')} | {f(inc, 'total_cpu', '{:.1f}')} | "
            f"{f(inc, 'maxrss_mib', '{:,.0f}')} | {ratio_cell(inc, base, 'wall')} | {ratio_cell(inc, base, 'total_cpu')} | "
            f"{f(inc, 'rows_written', '{:,.0f}')} | {f(inc, 'files_removed', '{:.0f}')} / {f(inc, 'target_files', '{:.0f}')} | "
            f"{f(inc, 'files_marked', '{:.0f}')} | {f(inc, 'rows_copied', '{:,.0f}')} | {f(inc, 'compaction_rows', '{:,.0f}')} | "
            f"{f(boot, 'wall')} | {f(boot, 'total_cpu', '{:.1f}')} | {f(boot, 'maxrss_mib', '{:,.0f}')} |"
        )
    return [*lines, ""]


def one_million(label: str) -> str:
    """The 1 M-row shape of an XL label's pattern: xl-20m-appends → xl-1m-appends."""
    size, _, pattern = label.removeprefix("xl-").partition("-")
    return f"xl-1m{'-' + pattern if pattern else ''}"


def by_shape(summary: dict, workloads: dict[str, wl.Workload]) -> list[str]:
    """One line per shape: sharesync's ratios, the figures the goals are about."""

    def ratio(scenario: str, other: str, field_: str = "wall") -> str:
        return ratio_cell(summary.get(f"{scenario}/sharesync"), summary.get(f"{scenario}/{other}"), field_)

    def wall(key: str) -> str:
        return f"{summary[key]['wall']:.2f}" if key in summary else "–"

    lines = ["| shape | rows | bootstrap s | × peer wall | × peer RSS | incremental s | × peer wall | × peer RSS | × limit wall | no-op s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for label, w in workloads.items():
        boot, inc = f"{label}-bootstrap", f"{label}-incremental"
        lines.append(
            f"| {label} | {w.rows:,} | {wall(f'{boot}/sharesync')} | {ratio(boot, 'peer')} | "
            f"{ratio(boot, 'peer', 'maxrss_mib')} | {wall(f'{inc}/sharesync')} | {ratio(inc, 'peer')} | "
            f"{ratio(inc, 'peer', 'maxrss_mib')} | {ratio(inc, 'limit')} | {wall(f'{label}-noop/sharesync')} |"
        )
    return lines

def notes(bench: Bench, summary: dict, workloads: dict[str, wl.Workload]) -> list[str]:
    extra = []
    for key, s in summary.items():
        p = s.get("probe")
        if p and key.endswith("noop/probe"):
            extra.append(f"- {key}: in-process `sync_all()` first call {s['first_call_seconds']:.3f} s, warm "
                         f"{s['warm_call_seconds']:.4f} s; engine imports {p['import_seconds']:.2f} s; "
                         f"outcomes {p['outcomes']}; Spark started: {p['engine_started']}, pysail imported: "
                         f"{p['pysail_imported']}")  # fmt: skip
        elif p and key.endswith("warm/probe"):
            cold = summary.get(key.replace("warm/probe", "incremental/sharesync"), {}).get("wall")
            versus = f" (a fresh process's pass: {cold:.2f} s)" if cold else ""
            extra.append(f"- {key}: the incremental batch as a running process's second pass (`sync --every`) "
                         f"{s['warm_pass_seconds']:.2f} s{versus}; its first pass, a bootstrap, "
                         f"{s['warmup_seconds']:.2f} s; peak RSS of the process {s['maxrss_mib']:.0f} MiB")  # fmt: skip
        elif p:
            extra.append(f"- {key}: `source_versions()` over {p['tables']} tables: first call "
                         f"{s['first_call_seconds']:.2f} s, warm {s['warm_call_seconds']:.2f} s, "
                         f"failed {p['failed']}; process {s['wall']:.2f} s")  # fmt: skip
        if s.get("timings"):
            extra.append(f"- {key} phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["timings"].items()))
    for scenario, run in bench.phases.items():
        top = [f"{k} {v:.2f} s" for k, v in run["phases"].items() if v >= 0.05][:12]
        extra.append(f"- {scenario}/sharesync instrumented run ({run['maxrss_mib']:.0f} MiB): " + ", ".join(top))
        if run["missing"]:
            extra.append(f"  - not instrumented (no longer in the product): {', '.join(run['missing'])}")
    for label, w in workloads.items():
        extra.append(f"- {label} ({w.name}): {w.rows:,} rows in {w.base_commits} commits, then {w.versions} "
                     f"versions ({', '.join(f'{w.kinds.count(k)} {k}' for k in dict.fromkeys(w.kinds))}) of "
                     f"~{w.change_rows:,} keys; {w.live_rows:,} rows at v{w.latest_version}; "
                     f"{w.change_file_rows:,} change rows in v{w.start_version + 1}..v{w.latest_version}")  # fmt: skip
    return extra

