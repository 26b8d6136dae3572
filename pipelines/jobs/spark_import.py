"""Import Spark Connect safely in processes whose ``__main__`` was never initialised.

Dagster's multiprocess executor runs each step in a multiprocessing child of a run worker
started as ``python -m dagster api execute_run``; multiprocessing does not re-import a ``-m``
main, so in the child ``__main__`` has neither ``__spec__`` nor ``__file__`` (``python -c``
looks the same). ``pyspark.sql.connect`` takes that for a doctest run: on import it looks for a
Spark installation and calls ``sys.exit(-1)`` when there is none, as with pyspark-client. The
check runs once, at import, so importing it once with a placeholder spec on ``__main__`` (put
back afterwards) is enough for the rest of the process.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys

CONNECT_MODULE = "pyspark.sql.connect.session"


def import_spark_connect() -> None:
    """Import pyspark's Spark Connect session module, working around the doctest heuristic."""
    if CONNECT_MODULE in sys.modules:
        return
    main = sys.modules.get("__main__")
    initialised = main is None or getattr(main, "__spec__", None) is not None or hasattr(main, "__file__")
    if initialised or hasattr(sys, "ps1"):
        importlib.import_module(CONNECT_MODULE)
        return
    assert main is not None
    original = main.__spec__
    main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    try:
        importlib.import_module(CONNECT_MODULE)
    finally:
        main.__spec__ = original
