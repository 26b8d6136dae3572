"""Is a lease's holder process alive? Yes, no, or "cannot tell from here" — never a guess."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from sharesync.state import Holder, default_owner, is_alive_on_this_host, this_process

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")


def test_this_process_is_alive_and_fully_described() -> None:
    me = this_process()
    assert me.pid == os.getpid() and me.started is not None and me.namespace is not None
    assert is_alive_on_this_host(me) is True
    assert str(me) == f"{me.host}:{me.pid}"


def test_a_reused_pid_is_another_process() -> None:
    me = this_process()
    assert me.started is not None
    assert is_alive_on_this_host(dataclasses.replace(me, started=me.started + 1)) is False


def test_an_exited_process_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert is_alive_on_this_host(dataclasses.replace(this_process(), pid=child.pid)) is False


def test_a_killed_unreaped_process_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = _start_time(child.pid)
        holder = dataclasses.replace(this_process(), pid=child.pid, started=started)
        assert is_alive_on_this_host(holder) is True
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z":  # a zombie until we reap it
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert is_alive_on_this_host(holder) is False
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    "elsewhere",
    [
        lambda h: dataclasses.replace(h, host="another-host"),
        lambda h: dataclasses.replace(h, namespace="another-boot/pid:[4026531836]"),  # rebooted, or a twin host
        lambda h: dataclasses.replace(h, namespace=None),  # written where there is no /proc
        lambda h: dataclasses.replace(h, started=None),
    ],
    ids=["other host", "other boot or namespace", "no namespace", "no start time"],
)
def test_what_this_host_cannot_judge_is_unknown(elsewhere: Callable[[Holder], Holder]) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for pid in (os.getpid(), gone.pid):  # alive or dead here, it says nothing about the holder
        holder = elsewhere(dataclasses.replace(this_process(), pid=pid))
        assert is_alive_on_this_host(holder) is None


def test_a_holder_needs_a_real_pid() -> None:
    with pytest.raises(ValueError, match="positive"):
        Holder("h", 0)


def test_default_owner_names_host_and_pid() -> None:
    me = this_process()
    assert default_owner().startswith(f"{me.host}:{me.pid}:")


def _fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _state(pid: int) -> str:
    return _fields(pid)[0]


def _start_time(pid: int) -> int:
    return int(_fields(pid)[19])
