"""What one measured sync wrote into its target: read from the target's Delta log, engine-neutral.

Issue 42 asks for the rows a batch writes into new files against the rows it changed. Per commit
after the start version: an ``add`` of a path the same commit ``remove``s is the old file given
a deletion vector (no data written: *marked*); any other ``add`` is a new file, and its
``numRecords`` are rows written; a ``remove`` whose path is not re-added is a file rewritten
away. Compaction commits (``OPTIMIZE``/``REORG``, or sharesync's own rewrite marker) are counted
apart: they are what maintenance chose to rewrite, not what the batch needed. ``rows_copied``
is the engine's own MERGE metric (``numTargetRowsCopied``) where it records one.
"""

from __future__ import annotations

import json
from pathlib import Path

WRITE_FIELDS = ("target_files", "rows_written", "files_added", "files_removed", "files_marked", "rows_copied",
                "compaction_rows")  # fmt: skip
_COMPACTIONS = ("OPTIMIZE", "REORG")
_MARKER = "sharesync-maintenance"


def batch_writes(target: Path, since: int) -> dict[str, float]:
    """The writes of every commit after version ``since`` of the Delta table at ``target``."""
    out = dict.fromkeys(WRITE_FIELDS, 0.0)
    out["target_files"] = float(_live_files(target, since))
    log = target / "_delta_log"
    for path in sorted(log.glob("*.json")):
        if not path.stem.isdigit() or int(path.stem) <= since:
            continue
        actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        compaction = info.get("operation") in _COMPACTIONS or _MARKER in str(info.get("userMetadata") or "")
        removed = {a["remove"]["path"] for a in actions if "remove" in a}
        added = {a["add"]["path"] for a in actions if "add" in a}
        for action in actions:
            if "add" in action:
                add = action["add"]
                if add["path"] in removed:
                    out["files_marked"] += 1
                    continue
                rows = float(json.loads(add.get("stats") or "{}").get("numRecords", 0))
                out["compaction_rows" if compaction else "rows_written"] += rows
                out["files_added"] += 0 if compaction else 1
            elif "remove" in action and action["remove"]["path"] not in added and not compaction:
                out["files_removed"] += 1
        metrics = info.get("operationMetrics") or {}
        out["rows_copied"] += float(metrics.get("numTargetRowsCopied", 0) or 0)
    return out


def _live_files(target: Path, version: int) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(str(target), version=version).file_uris())


def version_of(target: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(target)).version()
