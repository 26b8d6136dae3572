"""Do two threads get more done than one on the embedded engine? (issue 15: why the parallel pass
does not halve a serial pass of small tables on 2 cores.)

    .venv/bin/python -m bench.threads [--queries 40]

Each thread runs ``--queries`` small queries (what a small table's jobs are made of: short plans,
a few ms each). Timed: one thread; two threads on one Spark Connect session; two threads on two
sessions of the same engine. If two threads took about as long as one, the engine and client
would overlap; taking twice as long means the work is serialised (interpreter lock, CPU).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args(argv)
    os.environ.setdefault("RUST_LOG", "error")
    from pysail.spark import SparkConnectServer
    from pyspark.sql.connect.session import SparkSession

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    url = f"sc://127.0.0.1:{server.listening_address[1]}"

    def work(spark: SparkSession) -> Callable[[], None]:
        def run() -> None:
            for _ in range(args.queries):
                spark.range(0, 1000).selectExpr("sum(id) AS s").collect()

        return run

    def timed(*jobs: Callable[[], None]) -> float:
        threads = [threading.Thread(target=job) for job in jobs]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.monotonic() - began

    first, second = (SparkSession.builder.remote(url).create() for _ in range(2))
    timed(work(first), work(second))  # warm both sessions
    one = timed(work(first))
    shared = timed(work(first), work(first))
    separate = timed(work(first), work(second))
    print(f"{args.queries} queries: one thread {one:.2f} s; two threads, one session {shared:.2f} s "
          f"({shared / one:.2f}×); two threads, two sessions {separate:.2f} s ({separate / one:.2f}×)")  # fmt: skip
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
