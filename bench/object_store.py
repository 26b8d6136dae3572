"""The M incremental scenario with the target in object storage vs on the local disk (issue 20).

    .venv/bin/python -m bench.object_store                      # M, 3 runs each
    .venv/bin/python -m bench.object_store --scale 0.01 --runs 1  # the harness end to end, small data

An S3 API on loopback — moto's server in a process of its own (``tests/support/moto_process.py``,
no authentication) — holds one target (and, with ``--staging s3``, the staged batches); the
other target sits on the local disk. Both start from the same start state (the target and
checkpoint at the version before the change versions, set up once through a server that stops
there) and are restored before every run: the local one by copying its directory, the S3 one
by copying its objects inside the bucket. Runs alternate between the two; each is a fresh
``sharesync sync`` child measured like ``bench.run`` does (wall, peak RSS, CPU), and both
targets must equal the provider's table afterwards. The report is the overhead of the S3 target
(median wall S3 / local). moto is a Python server: it measures sharesync's extra requests and
copies, not a real store's latency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

from bench import workload as wl
from bench.commands import remove, restore, sharesync_argv
from bench.measure import REPO, log, run_child
from bench.servers import Server, serving_root
from bench.start_state import start_state, verify

MOTO = REPO / "tests" / "support" / "moto_process.py"
BUCKET = "bench"
KEY = "bench"  # moto without authentication takes any key


class Moto:
    """moto's S3 server as a subprocess; the bucket ``bench``."""

    def __init__(self, work: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(MOTO), str(work / "moto-commits.jsonl")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.endpoint = f"http://127.0.0.1:{int(self.process.stdout.readline())}"
        self.filesystem(allow_bucket_creation=True).create_dir(BUCKET)

    def settings(self) -> dict[str, object]:
        return {"endpoint": self.endpoint, "region": "us-east-1", "access_key_id": KEY, "secret_access_key": KEY,
                "allow_http": True}  # fmt: skip

    def options(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": KEY,
                "AWS_SECRET_ACCESS_KEY": KEY, "AWS_ALLOW_HTTP": "true"}  # fmt: skip

    def filesystem(self, **options: bool):  # noqa: ANN201 - pyarrow.fs.S3FileSystem
        from pyarrow import fs

        return fs.S3FileSystem(access_key=KEY, secret_key=KEY, region="us-east-1", endpoint_override=self.endpoint,
                               scheme="http", **options)  # fmt: skip

    def copy(self, source: str, dest: str) -> None:
        """``s3://bench/<source>`` to ``…/<dest>``, replacing what was there."""
        from pyarrow import fs

        s3 = self.filesystem()
        try:
            s3.delete_dir(f"{BUCKET}/{dest}")
        except FileNotFoundError:
            pass
        fs.copy_files(f"{BUCKET}/{source}", f"{BUCKET}/{dest}", source_filesystem=s3, destination_filesystem=s3)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def s3_config(local_config: Path, moto: Moto, staging: str) -> Path:
    """The local start state's config, with the target (and staging) in the bucket."""
    config = yaml.safe_load(local_config.read_text())
    config["tables"][0]["target"] = f"s3://{BUCKET}/target"
    config["storage"] = {f"s3://{BUCKET}/": moto.settings()}
    if staging == "s3":
        config["staging_dir"] = f"s3://{BUCKET}/staging"
    directory = local_config.parent.parent / "ss-inc-s3"
    directory.mkdir(parents=True, exist_ok=True)
    config["state_store"] = f"sqlite:///{directory / 'state.db'}"
    path = directory / "sharesync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the M shape's rows and changed keys")
    parser.add_argument("--staging", choices=("local", "s3"), default="s3", help="where the S3 run stages batches")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", default="/tmp/sharesync-bench-s3", help="scratch directory")
    args = parser.parse_args(argv)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    w = wl.build(wl.SHAPES["M"].scaled(args.scale), args.seed, log=log)
    server = Server(serving_root(work, "root", {w.name: w.table_path}), work, "main")
    moto = Moto(work)
    try:
        log(f"M incremental v{w.start_version + 1}..v{w.latest_version} ({w.change_file_rows:,} change rows)")
        state = start_state(work, w, server.profile, peer=False)
        s3 = s3_config(state.config, moto, args.staging)
        s3_dir = s3.parent
        remove(s3_dir / "state.db")
        at_start = serving_root(work, "root-start-s3", {w.name: wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name})
        start_server = Server(at_start, work, "start-s3")
        try:
            run_child(sharesync_argv(s3), log_to=work / "logs" / "setup-s3.log",
                      env={"SHARESYNC_PROFILE": str(start_server.profile)})  # fmt: skip
        finally:
            start_server.stop()
        moto.copy("target", "target-seed")
        restore(s3_dir, work / "ss-inc-s3-seed")

        def restore_s3() -> None:
            moto.copy("target-seed", "target")
            restore(work / "ss-inc-s3-seed", s3_dir)

        walls: dict[str, list[float]] = {"local": [], "s3": []}
        for run in range(args.runs):
            for name in ("local", "s3") if run % 2 == 0 else ("s3", "local"):
                (state.restore_sharesync if name == "local" else restore_s3)()
                config = state.config if name == "local" else s3
                m = run_child(sharesync_argv(config), log_to=work / "logs" / f"{name}-{run}.log", server_pid=server.pid)
                walls[name].append(m.wall)
                log(
                    f"  incremental/{name:<5} run {run + 1}: {m.wall:7.2f} s  {m.maxrss_mib:6.0f} MiB  cpu {m.cpu:5.1f} s"
                )
        verify(w, {"local": state.sharesync / "target"})
        verify(w, {"s3": f"s3://{BUCKET}/target"}, storage_options=moto.options())
        local, remote = statistics.median(walls["local"]), statistics.median(walls["s3"])
        print(json.dumps({"local_wall": local, "s3_wall": remote, "overhead": remote / local, "staging": args.staging,
                          "scale": args.scale, "runs": args.runs}))  # fmt: skip
    finally:
        moto.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
