"""Google Cloud Storage on loopback for the tests: the ``fake-gcs-server`` emulator.

It is built on first need with ``go install github.com/fsouza/fake-gcs-server@v1.56.1`` (the Go
module proxy; a few minutes, once) into ``.engines/fake-gcs-server`` through
:func:`support.installs.install_once`, so that two pytest-xdist workers do not both build it. Never skipped: without Go the
tests that need it fail, saying so. It runs in memory on a free port of 127.0.0.1 over plain HTTP
and accepts any OAuth token (it checks none), so the tests see which token was sent only from the
reader's side.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from support.installs import ENGINES, install_once

MODULE = "github.com/fsouza/fake-gcs-server@v1.56.1"
BUCKET = "lake"


def fake_gcs_server() -> Path:
    """The emulator's binary, built with ``go install`` the first time (one builder at a time)."""
    home = ENGINES / "fake-gcs-server"
    return (
        install_once("fake-gcs-server", ["go", "install", MODULE], ready="fake-gcs-server", env={"GOBIN": str(home)})
        / "fake-gcs-server"
    )


@dataclass(frozen=True)
class GcsStore:
    endpoint: str  # http://127.0.0.1:PORT

    @property
    def root(self) -> str:
        return f"gs://{BUCKET}"

    def prefix(self) -> str:
        return f"{self.root}/t-{uuid.uuid4().hex[:12]}"

    def filesystem(self) -> object:
        """pyarrow's own GCS client of the emulator (anonymous: it checks no credentials)."""
        from pyarrow import fs

        return fs.GcsFileSystem(anonymous=True, scheme="http", endpoint_override=self.endpoint.removeprefix("http://"))

    def upload(self, directory: Path, uri: str) -> None:
        """Copy a table directory a writer made on disk to ``uri`` (pyarrow's client, not sharesync's)."""
        target = self.filesystem()
        path = uri.removeprefix("gs://")
        for file in sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.endswith(".crc")):
            with target.open_output_stream(f"{path}/{file.relative_to(directory).as_posix()}") as out:  # type: ignore[attr-defined]
                out.write(file.read_bytes())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def gcs_store() -> Iterator[GcsStore]:
    """A running emulator with the bucket ``lake``, stopped at the end."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(fake_gcs_server()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
         "-public-host", f"127.0.0.1:{port}", "-external-url", endpoint, "-log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with httpx.Client(base_url=endpoint, timeout=5) as http:
            for _ in range(200):  # the server's socket, polled until it answers (it prints nothing reliable)
                try:
                    http.post("/storage/v1/b", json={"name": BUCKET}).raise_for_status()
                    break
                except httpx.TransportError:
                    if process.poll() is not None:
                        raise RuntimeError("fake-gcs-server exited at start") from None
                    time.sleep(0.05)
            else:
                raise RuntimeError("fake-gcs-server did not answer")
        yield GcsStore(endpoint)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
