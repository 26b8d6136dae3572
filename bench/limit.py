"""The limit: fetch the file list, download exactly those files in parallel over loopback, decode them.

Nothing else — no staging, no engine, no target. It is the floor any pipeline reading the same
share through the same server pays, so "sharesync / limit" says how much sharesync adds.

* ``snapshot [--version V]``: ``POST …/query`` → every ``file`` of the snapshot;
* ``changes --from S [--to E]``: ``GET …/changes`` → per version, the ``cdf`` files when the
  version has any, else its ``add``/``remove`` files (the protocol's rule, the same files
  sharesync downloads: see ``sharesync.sync.protocol.changes.select_change_files``).

``--delta-format`` (tables with deletion vectors or column mapping, which a server answers only
in the delta format): the same requests asking for ``responseformat=delta``, the files taken
from each ``file.deltaSingleAction`` (``cdc``, else ``add``/``remove``). Deletion-vector files are
not fetched: they are a few KB per data file, and the floor stays a floor.

Downloads run on one asyncio loop with ``--concurrency`` connections (sharesync's default is
8); each body is decoded with ``pyarrow.parquet`` on a small thread pool as soon as it
arrives and then dropped, so memory stays bounded by what is in flight. Raw ``httpx`` and
``json`` only: importing sharesync would add its own start-up cost to the floor.
Prints one JSON line: files, bytes, rows, and the time spent listing and downloading+decoding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote


def _table_url(endpoint: str, table: str) -> str:
    share, schema, name = table.split(".")
    return f"{endpoint.rstrip('/')}/shares/{quote(share)}/schemas/{quote(schema)}/tables/{quote(name)}"


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


DELTA_CAPABILITIES = "responseformat=delta;readerfeatures=deletionvectors,columnmapping,timestampntz"


def _actions(line: dict) -> list[tuple[str, dict]]:
    """``(kind, action with url and version)`` of one response line, in either format."""
    if "file" in line and "deltaSingleAction" in line["file"]:  # the delta format
        wrapper = line["file"]
        single = wrapper["deltaSingleAction"]
        return [("cdf" if kind == "cdc" else kind, {"url": single[kind]["path"], "version": wrapper.get("version")})
                for kind in ("add", "cdc", "remove") if kind in single]  # fmt: skip
    return [(kind, line[kind]) for kind in ("file", "add", "cdf", "remove") if kind in line]


def list_snapshot(client, base: str, version: int | None) -> list[dict]:  # noqa: ANN001
    body = {} if version is None else {"version": version}
    response = client.post(f"{base}/query", json=body)
    response.raise_for_status()
    return [action for line in _lines(response.text) for _, action in _actions(line)]


def list_changes(client, base: str, start: int, end: int | None) -> list[dict]:  # noqa: ANN001
    params = {"startingVersion": start, **({"endingVersion": end} if end is not None else {})}
    response = client.get(f"{base}/changes", params=params)
    response.raise_for_status()
    by_version: dict[int, dict[str, list[dict]]] = {}
    for line in _lines(response.text):
        for kind, action in _actions(line):
            by_version.setdefault(action["version"], {}).setdefault(kind, []).append(action)
    files: list[dict] = []
    for version in sorted(by_version):
        kinds = by_version[version]
        files += kinds["cdf"] if "cdf" in kinds else kinds.get("add", []) + kinds.get("remove", [])
    return files


async def fetch_all(files: list[dict], concurrency: int, decoders: int) -> tuple[int, int]:
    import httpx
    import pyarrow as pa
    import pyarrow.parquet as pq

    def decode(data: bytes) -> int:
        return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).read(use_threads=False).num_rows

    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(concurrency)
    totals = [0, 0]  # bytes, rows
    with ThreadPoolExecutor(max_workers=decoders) as pool:
        async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=concurrency)) as http:

            async def one(file: dict) -> None:
                async with slots:
                    response = await http.get(file["url"])
                    response.raise_for_status()
                    data = response.content
                rows = await loop.run_in_executor(pool, decode, data)
                totals[0] += len(data)
                totals[1] += rows

            await asyncio.gather(*(one(f) for f in files))
    return totals[0], totals[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="limit: list, download in parallel and decode the same files")
    parser.add_argument("--profile", required=True, type=Path)
    parser.add_argument("--table", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--decoders", type=int, default=2)
    parser.add_argument("--delta-format", action="store_true", help="ask for responseformat=delta")
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot")
    snap.add_argument("--version", type=int, default=None)
    changes = sub.add_parser("changes")
    changes.add_argument("--from", dest="start", type=int, required=True)
    changes.add_argument("--to", dest="end", type=int, default=None)
    args = parser.parse_args(argv)

    import httpx

    began = time.monotonic()
    profile = json.loads(args.profile.read_text())
    base = _table_url(profile["endpoint"], args.table)
    headers = {"Authorization": f"Bearer {profile['bearerToken']}"}
    if args.delta_format:
        headers["delta-sharing-capabilities"] = DELTA_CAPABILITIES
    with httpx.Client(headers=headers, timeout=300) as client:
        if args.command == "snapshot":
            files = list_snapshot(client, base, args.version)
        else:
            files = list_changes(client, base, args.start, args.end)
    listed = time.monotonic()
    size, rows = asyncio.run(fetch_all(files, args.concurrency, args.decoders))
    done = time.monotonic()
    print(json.dumps({
        "pipeline": "limit", "command": args.command, "files": len(files), "bytes": size, "rows": rows,
        "timings": {"list": listed - began, "download_decode": done - listed}, "seconds": done - began,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
