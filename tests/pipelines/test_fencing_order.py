"""Every target commit takes its stale-writer fencing number as it commits (sharesync.pipelines.targets.delta.fencing).

The numbers of one lease holding must follow the order of its commits: a writer numbered early and
saved after a later-numbered commit would be skipped by Delta on Spark as if a newer holder had
written — and the batch would look applied (the type-widening run on Spark caught exactly that, a
snapshot writer built before the widening commit). So a DataFrame write of a target happens in one
place only, the target format's writer (targets/delta/write.py), each as ``fenced(writer).save(…)``;
and each MERGE or DELETE, wherever a job runs it, runs inside ``fenced_dml``.
"""

from __future__ import annotations

import re
from pathlib import Path

import sharesync.pipelines as pipelines

# Every module that could write a target: the shared jobs, the modes' own jobs, the target format.
MODULES = sorted(Path(pipelines.__file__).parent.rglob("*.py"))
WRITER = Path(pipelines.__file__).parent / "targets" / "delta" / "write.py"


def _saves(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        (n, line)
        for n, line in enumerate(lines, 1)
        if re.search(r"(?<!WRITER)\.save\(", line) and not line.lstrip().startswith(("#", "(``"))
    ]


def test_only_the_format_writer_saves_a_dataframe() -> None:
    elsewhere = [f"{path.name}:{n}: {line.strip()}" for path in MODULES if path != WRITER for n, line in _saves(path)]
    assert not elsewhere, elsewhere


def test_only_the_format_writer_spells_the_format() -> None:
    spelled = [
        f"{path.name}:{n}: {line.strip()}"
        for path in MODULES
        if path != WRITER
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if 'format("delta")' in line
    ]
    assert not spelled, spelled


def test_every_save_of_the_writer_is_numbered_in_the_call_that_saves() -> None:
    saves = _saves(WRITER)
    assert saves, "targets/delta/write.py saves no more: point this test at the module that does"
    bare = [f"write.py:{n}: {line.strip()}" for n, line in saves if not re.search(r"fenced\(.*\)\.save\(", line)]
    assert not bare, bare


def test_every_merge_and_delete_runs_fenced() -> None:
    unfenced = []
    for path in MODULES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if ".merge()" in line or 'sql(f"DELETE FROM' in line:
                if "with fenced_dml(" not in lines[number - 2]:
                    unfenced.append(f"{path.name}:{number}: {line.strip()}")
    assert not unfenced, unfenced
