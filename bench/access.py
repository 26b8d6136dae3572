"""Directory access vs URL access on one table: a bootstrap and an incremental sync (issue 32).

    .venv/bin/python -m bench.access                    # 400 k rows, 10 MERGE versions of 10 k keys
    .venv/bin/python -m bench.access --scale 0.1        # small

moto's S3 (a process of its own, no authentication) holds the provider's table, written by
``deltalake`` with change data feed on; ``sharesync serve`` (in this process) shares it for both
modes. Two merge targets on the local disk are synced from it, one with ``access: url`` (the
server mirrors the log and presigns S3 URLs), one with ``access: dir`` (sharesync does that itself
with the server's temporary credentials): the bootstrap at version 3, then, after 10 MERGE commits,
the incremental. Wall time of ``Syncer.sync_all()`` per run, after the engine has started.
moto is a Python server: this measures sharesync's own work per mode, not a cloud store's latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from sharesync.pipelines.jobs.session import SparkEngine
from sharesync.pipelines.run.sync_pass import Syncer
from sharesync.pipelines.targets.delta.rows import count_rows
from sharesync.sync.core.config import parse_config
from sharesync.sync.core.storage import StoreSettings
from sharesync.sync.server.runner import SharingServer
from sharesync.sync.server.settings import RemoteTableSpec

REPO = Path(__file__).resolve().parents[1]
MOTO = REPO / "tests" / "support" / "moto_process.py"
KEY, REGION = "bench", "us-east-1"


def _rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(rng.choice(["eu", "us", "apac", "latam", "mea"], len(ids))),
            "amount": pa.array(rng.normal(100, 30, len(ids))),
            "note": pa.array([f"note-{i}" for i in rng.integers(0, 10**9, len(ids))]),
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3, help="each on a table of its own; the mode order alternates")
    args = parser.parse_args(argv)
    rows, keys = int(400_000 * args.scale), int(10_000 * args.scale)
    work = Path(tempfile.mkdtemp(prefix="sharesync-bench-access-"))
    moto = subprocess.Popen(
        [sys.executable, str(MOTO), str(work / "moto.jsonl")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert moto.stdout is not None and moto.stdin is not None
    try:
        endpoint = f"http://127.0.0.1:{int(moto.stdout.readline())}"
        client = {
            "endpoint_url": endpoint,
            "region_name": REGION,
            "aws_access_key_id": KEY,
            "aws_secret_access_key": KEY,
        }
        boto3.client("s3", **client).create_bucket(Bucket="bench")
        trust = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
        role = boto3.client("iam", **client).create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps(trust))
        options = {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": KEY,
                   "AWS_SECRET_ACCESS_KEY": KEY, "AWS_ALLOW_HTTP": "true"}  # fmt: skip
        runs = [
            _run(work / f"run-{n}", endpoint, options, role["Role"]["Arn"], rows, keys, n % 2 == 1)
            for n in range(args.runs)
        ]
        print(f"rows {rows}, 10 MERGE versions of {keys} keys; median wall seconds of sync_all() over {args.runs} runs")
        print("| scenario | url | dir | dir / url |\n|---|---|---|---|")
        for scenario in ("bootstrap", "incremental"):
            url = statistics.median(r[(scenario, "url")] for r in runs)
            dir_ = statistics.median(r[(scenario, "dir")] for r in runs)
            print(f"| {scenario} | {url:.2f} | {dir_:.2f} | {dir_ / url:.2f} |")
    finally:
        moto.stdin.close()
        moto.wait(timeout=10)
        moto.stdout.close()
    return 0


def _run(
    work: Path, endpoint: str, options: dict[str, str], role: str, rows: int, keys: int, dir_first: bool
) -> dict[tuple[str, str], float]:
    """One bootstrap and one incremental per mode, on a table of its own."""
    work.mkdir()
    source = f"s3://bench/{work.name}/orders"
    rng = np.random.default_rng(7)
    for part in range(4):  # versions 0-3
        ids = np.arange(part * rows // 4, (part + 1) * rows // 4)
        write_deltalake(source, _rows(rng, ids), mode="append", storage_options=options,
                        configuration={"delta.enableChangeDataFeed": "true"} if part == 0 else None)  # fmt: skip
    store = StoreSettings(endpoint=endpoint, region=REGION, access_key_id=KEY, secret_access_key=KEY, allow_http=True)  # type: ignore[arg-type]
    (work / "root").mkdir()
    spec = RemoteTableSpec(name="b.s.orders", location=source)
    with SharingServer(work / "root", remote_tables=(spec,), object_store=store, credentials_role_arn=role) as server:
        profile = server.write_profile(work / "p.share")
        SparkEngine().session()  # the embedded engine starts before anything is timed
        syncers = {}
        for mode in ("dir", "url") if dir_first else ("url", "dir"):
            raw = {"profile": str(profile), "allow_private_file_urls": True, "state_store": f"sqlite:///{work}/{mode}.db", "staging_dir": str(work / f"staging-{mode}"),
                   "provider_storage": {"s3://bench/": {"endpoint": endpoint, "region": REGION, "allow_http": True}},
                   "tables": [{"name": "b.s.orders", "target": str(work / f"target-{mode}"), "keys": ["id"], "access": mode}]}  # fmt: skip
            syncers[mode] = Syncer(parse_config(raw, base_dir=work))
        timings: dict[tuple[str, str], float] = {}
        for mode, syncer in syncers.items():
            timings[("bootstrap", mode)] = _timed(syncer)
        for version in range(10):  # versions 4-13: MERGEs of `keys` keys, 70 % existing
            table = DeltaTable(source, storage_options=options)
            ids = np.concatenate(
                [
                    rng.choice(rows, int(keys * 0.7), replace=False),
                    np.arange(rows + version * keys, rows + version * keys + int(keys * 0.3)),
                ]
            )
            (table.merge(_rows(rng, np.unique(ids)), "t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())  # fmt: skip
        for mode, syncer in syncers.items():
            timings[("incremental", mode)] = _timed(syncer)
        for syncer in syncers.values():
            syncer.close()
        for mode in ("url", "dir"):
            assert (
                count_rows(DeltaTable(str(work / f"target-{mode}")))  # targets hold deletion vectors
                == count_rows(DeltaTable(source, storage_options=options))
            )
    return timings


def _timed(syncer: Syncer) -> float:
    started = time.perf_counter()
    results = syncer.sync_all()
    elapsed = time.perf_counter() - started
    assert all(r.error is None for r in results), [r.error for r in results]
    return elapsed


if __name__ == "__main__":
    raise SystemExit(main())
