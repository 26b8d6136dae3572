"""Azure Blob Storage on loopback for the object-storage tests: the ``azurite`` emulator (npm).

``azurite-blob`` is found through ``SHARESYNC_TEST_AZURITE`` (its path) or on ``PATH``, else
installed on first need with npm into ``.engines/node`` (``support.installs``): never a skip; a
machine without npm fails the tests that need it, naming npm. It runs in memory on a free port;
the container ``lake`` is created, and targets are
``abfss://lake@devstoreaccount1.dfs.core.windows.net/…`` URIs reached through the emulator's
endpoint with its documented development account and key.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from support.installs import install_once

ENV = "SHARESYNC_TEST_AZURITE"
ACCOUNT = "devstoreaccount1"
# The emulator's well-known development key (public, in Microsoft's Azurite documentation).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONTAINER = "lake"


@dataclass(frozen=True)
class AzuriteStore:
    endpoint: str  # http://127.0.0.1:PORT/devstoreaccount1

    @property
    def root(self) -> str:
        return f"abfss://{CONTAINER}@{ACCOUNT}.dfs.core.windows.net"

    def storage(self) -> dict[str, Any]:
        settings = {"account_name": ACCOUNT, "account_key": KEY, "endpoint": self.endpoint, "allow_http": True}
        return {f"{self.root}/": settings}

    def options(self) -> dict[str, str]:
        """``deltalake`` storage options, independent of sharesync's mapping."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
            "AZURE_STORAGE_ENDPOINT": self.endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }

    def prefix(self) -> str:
        return f"{self.root}/t-{uuid.uuid4().hex[:12]}"

    def keys(self, prefix: str) -> list[str]:
        from pyarrow import fs

        path = f"{CONTAINER}/{prefix.removeprefix(self.root + '/')}"
        found = self._filesystem().get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
        return sorted(i.path + ("/" if i.type == fs.FileType.Directory else "") for i in found)

    def _filesystem(self) -> Any:
        from pyarrow import fs

        authority = self.endpoint.removeprefix("http://").split("/")[0]
        return fs.AzureFileSystem(
            ACCOUNT,
            account_key=KEY,
            blob_storage_authority=authority,
            dfs_storage_authority=authority,
            blob_storage_scheme="http",
            dfs_storage_scheme="http",
        )


NPM_INSTALL = ["npm", "install", "--prefix", ".", "--no-audit", "--no-fund", "--loglevel=error", "azurite@3"]
BIN = "node_modules/.bin/azurite-blob"


def _executable() -> str:
    if found := os.environ.get(ENV) or shutil.which("azurite-blob"):
        return found
    return str(install_once("node", NPM_INSTALL, ready=BIN) / BIN)


@contextmanager
def azurite_store() -> Iterator[AzuriteStore]:
    executable = _executable()
    process = subprocess.Popen(
        [executable, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        port = None
        for line in process.stdout:
            found = re.search(r"listens on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port is not None, "azurite did not start"
        store = AzuriteStore(f"http://127.0.0.1:{port}/{ACCOUNT}")
        store._filesystem().create_dir(CONTAINER)
        yield store
    finally:
        process.terminate()  # it waits for the engine's idle keep-alive connections: not for long
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
