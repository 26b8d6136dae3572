"""Spark Connect imports in a process whose ``__main__`` is uninitialised, as in Dagster step processes."""

from __future__ import annotations

import subprocess
import sys

# ``python -c`` leaves ``__main__`` without __spec__ and __file__, exactly like a multiprocessing
# child of ``python -m dagster api execute_run`` (the run worker of every launched run).
PLAIN = "import pyspark.sql.connect.session"
GUARDED = (
    "import sys; from sharesync.pipelines.jobs.spark_import import import_spark_connect; import_spark_connect(); "
    "import pyspark.sql.connect.session; assert sys.modules['__main__'].__spec__ is None; print('imported')"
)


def test_plain_import_exits_and_the_guarded_one_works() -> None:
    plain = subprocess.run([sys.executable, "-c", PLAIN], check=False, capture_output=True, text=True, timeout=120)
    assert plain.returncode != 0 and "SPARK_HOME" in plain.stderr  # pyspark's doctest heuristic, unguarded

    guarded = subprocess.run([sys.executable, "-c", GUARDED], check=False, capture_output=True, text=True, timeout=120)
    assert guarded.returncode == 0, guarded.stderr
    assert guarded.stdout.strip() == "imported"
