"""The benchmark's goals (issues 12, 14, 16, 29, 34) checked against a run's medians: PASS, MISS or not measured."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.scenarios import Bench


# Issue 42: an incremental batch of the same change volume, as a multiple of its cost at 1 M rows
# (wall and CPU, per change pattern), per engine; rows it writes into new files ≤ 2× the changed rows.
XL_CURVE = {"sail": {"20m": 1.5, "50m": 2.0}, "spark": {"20m": 2.0}}
XL_WRITTEN = 2.0
XL_RSS_MIB = 2048  # peak RSS of any XL run (issue 34)


def ratio_cell(mine: dict | None, other: dict | None, field_: str) -> str:
    """``mine / other`` for a table cell, ``–`` when either is missing."""
    return f"{mine[field_] / other[field_]:.2f}" if mine and other and other[field_] else "–"


def check_goals(bench: Bench, summary: dict, labels: list[str]) -> list[str]:
    """One line per goal that applies to the shapes and scenarios that ran."""
    out: list[str] = []

    def get(key: str, field_: str = "wall") -> float | None:
        return summary.get(key, {}).get(field_)

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    def check(name: str, value: float | None, bound: float, unit: str = "×") -> None:
        if value is None:
            out.append(f"- [----] {name}: not measured (goal ≤ {bound}{unit})")
        elif value <= bound:
            out.append(f"- [PASS] {name}: {value:.2f}{unit} (goal ≤ {bound}{unit})")
        else:
            out.append(f"- [MISS] {name}: {value:.2f}{unit} (goal ≤ {bound}{unit}; {value / bound - 1:.0%} over)")

    def versus(scenario: str, other: str, field_: str = "wall") -> float | None:
        return ratio(get(f"{scenario}/sharesync", field_), get(f"{scenario}/{other}", field_))

    ran = set(bench.args.scenarios)
    xl_goals(bench, summary, labels, ran, check)
    if bench.spark is not None:  # issue 29 §5: against the Spark user's own pipeline, on the same engine
        for label in labels:
            for scenario in ("bootstrap", "incremental"):
                if scenario in ran:
                    key = f"{label}-{scenario}"
                    check(f"{key} on Spark: wall vs the Spark peer", versus(key, "peer"), 0.5)
                    check(f"{key} on Spark: client + Spark server memory vs the Spark peer's",
                          versus(key, "peer", "total_rss_mib"), 0.7)  # fmt: skip
        return out
    for label in labels:
        inc, boot = f"{label}-incremental", f"{label}-bootstrap"
        if "incremental" in ran:
            check(f"{inc}: wall vs peer", versus(inc, "peer"), 0.5)
            check(f"{inc}: peak RSS vs peer", versus(inc, "peer", "maxrss_mib"), 0.6)
        if "bootstrap" in ran:
            check(f"{boot}: wall vs peer", versus(boot, "peer"), 0.8)
        if "noop" in ran:
            check(f"{label}-noop: process wall", get(f"{label}-noop/sharesync"), 0.3, " s")
    if "small" in labels and "incremental" in ran:
        check(
            "small-incremental: a pass with changes (process wall)", get("small-incremental/sharesync"), 1.0, " s"
        )
    if "small" in labels and "warm" in ran:
        check(
            "small-warm: a pass with changes in a running `sync --every` process",
            get("small-warm/probe", "warm_pass_seconds"),
            1.0,
            " s",
        )
    if "dv" in labels and "incremental" in ran:  # issue 12's own bound: half the peer's memory too
        check("dv-incremental (issue 12): peak RSS vs peer", versus("dv-incremental", "peer", "maxrss_mib"), 0.5)
    if "M" in labels and "incremental" in ran:
        check("M-incremental: wall vs limit", versus("M-incremental", "limit"), 2.5)
    if "L" in labels and "M" in labels:
        for scenario in ("bootstrap", "incremental"):
            if scenario in ran:
                check(f"peak RSS L/M ({scenario}, sharesync)",
                      ratio(get(f"L-{scenario}/sharesync", "maxrss_mib"), get(f"M-{scenario}/sharesync", "maxrss_mib")),
                      1.3)  # fmt: skip
    if "history" in ran:
        from bench import history

        for name, value, bound in history.goals(get, labels):
            check(name, value, bound)
    if "poll" in ran:
        check(
            f"poll {bench.args.poll_tables:,} table versions (in-process, first call)",
            get("poll/probe", "first_call_seconds"),
            2.0,
            " s",
        )
    return out



def xl_goals(bench: Bench, summary: dict, labels: list[str], ran: set[str], check: Callable[..., None]) -> None:
    """Issue 42's size curve: cost against xl-1m of the same pattern, rows written, peak RSS."""
    from bench.report import one_million
    from bench.workload import SHAPES

    curve = XL_CURVE["spark" if bench.spark is not None else "sail"]
    for label in (label for label in labels if label.startswith("xl-")):
        inc = summary.get(f"{label}-incremental/sharesync")
        base = summary.get(f"{one_million(label)}-incremental/sharesync")
        bound = curve.get(label.removeprefix("xl-").split("-")[0])
        if "incremental" in ran and bound is not None:
            for field_, name in (("wall", "wall"), ("total_cpu", "cpu")):  # cpu: with a Spark server's
                value = inc[field_] / base[field_] if inc and base and base.get(field_) else None
                check(f"{label}-incremental: {name} vs {one_million(label)}'s (sharesync)", value, bound)
        if "incremental" in ran and inc and "rows_written" in inc:
            shape = SHAPES[label].scaled(bench.args.scale)
            changed = shape.versions * shape.change_rows
            check(f"{label}-incremental: rows written into new files vs keys changed", inc["rows_written"] / changed,
                  XL_WRITTEN)  # fmt: skip
        for scenario in ("bootstrap", "incremental"):
            if scenario in ran:
                check(f"{label}-{scenario}: peak RSS (sharesync)", summary.get(f"{label}-{scenario}/sharesync", {}).get(
                    "maxrss_mib"), XL_RSS_MIB, " MiB")  # fmt: skip
