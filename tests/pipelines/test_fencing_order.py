"""Every target commit of a job takes its fencing number as it commits (sharesync.pipelines.jobs.fencing).

The numbers of one lease holding must follow the order of its commits: a writer numbered early and
saved after a later-numbered commit would be skipped by Delta on Spark as if a newer holder had
written — and the batch would look applied (the type-widening run on Spark caught exactly that, a
snapshot writer built before the widening commit). So each save is ``fenced(writer).save(…)`` and
each MERGE or DELETE runs inside ``fenced_dml``.
"""

from __future__ import annotations

import re
from pathlib import Path

import sharesync.pipelines as pipelines

# Every module that writes a target: the shared jobs, the modes' own jobs, the target format's writer.
WRITERS = sorted(Path(pipelines.__file__).parent.rglob("*.py"))


def test_every_save_is_numbered_in_the_call_that_saves() -> None:
    bare = [
        f"{path.name}:{number}: {line.strip()}"
        for path in WRITERS
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ".save(" in line
        and not line.lstrip().startswith(("#", "(``"))
        and not re.search(r"fenced\(.*\)\.save\(", line)
    ]
    assert not bare, bare


def test_every_merge_and_delete_runs_fenced() -> None:
    unfenced = []
    for path in WRITERS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if ".merge()" in line or 'sql(f"DELETE FROM' in line:
                if "with fenced_dml(" not in lines[number - 2]:
                    unfenced.append(f"{path.name}:{number}: {line.strip()}")
    assert not unfenced, unfenced
