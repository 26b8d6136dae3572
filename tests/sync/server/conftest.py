"""Server-test fixtures: an authenticated httpx client and tables (with servers) tests may change."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.faults import SharingServer

from sharesync.sync.server.samples import apply_random_commits, create_sample_table


@pytest.fixture
def api(sharing_server: SharingServer) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=sharing_server.endpoint, headers={"Authorization": f"Bearer {sharing_server.token}"}
    ) as client:
        yield client


@dataclass
class Scratch:
    """A table of its own behind its own server: for tests that commit, clean up or vacuum."""

    server: SharingServer
    path: Path
    client: httpx.Client
    url: str = "/shares/scratch/schemas/s/tables/t"


@pytest.fixture
def scratch(tmp_path: Path, start_server: Callable[..., SharingServer]) -> Iterator[Callable[..., Scratch]]:
    clients: list[httpx.Client] = []

    def make(*, commits: int = 4, partitioned: bool = True, seed: int = 0) -> Scratch:
        root = tmp_path / f"root-{len(clients)}"
        path = create_sample_table(root / "scratch" / "s" / "t", rows=12, partitioned=partitioned, seed=seed)
        apply_random_commits(path, random.Random(seed), commits)
        server = start_server(root)
        client = httpx.Client(base_url=server.endpoint, headers={"Authorization": f"Bearer {server.token}"})
        clients.append(client)
        return Scratch(server, path, client)

    yield make
    for client in clients:
        client.close()
