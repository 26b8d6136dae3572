"""Who holds a lease, and whether that process still lives on this host.

This is what lets the next sync on the same machine take over a killed sync's lease at once
instead of waiting for its ttl. Being wrong in one direction is costly (a live holder's lease
taken), in the other only slow (a dead holder's lease waits for its ttl), so every doubt
answers "cannot tell" and leaves the lease to its ttl:

* a holder on another host, in another pid namespace (container) or kernel boot: its pids
  mean nothing here;
* a system without ``/proc`` (macOS, Windows), where no start time is recorded;
* a process that exists but whose start time cannot be read (``/proc`` mounted ``hidepid``).

Dead means: no such pid, a zombie, or a pid now used by a process that started at another
time (field 22 of ``/proc/<pid>/stat``).
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from sharesync.state.records import Holder

_PROC = Path("/proc")


def default_owner() -> str:
    """``host:pid:random`` — unique per process, and tells a person where the holder runs."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def this_process() -> Holder:
    """The calling process as a lease holder (read on each call: a forked child is another)."""
    pid = os.getpid()
    try:
        stat = _stat(pid)
    except OSError:
        stat = None
    return Holder(
        host=socket.gethostname(),
        pid=pid,
        started=None if stat is None else stat[1],
        namespace=_namespace(),
    )


def is_alive_on_this_host(holder: Holder) -> bool | None:
    """True if ``holder`` still runs, False if it is gone, None if this host cannot tell."""
    if holder.started is None or holder.namespace is None:
        return None
    if holder.host != socket.gethostname() or holder.namespace != _namespace():
        return None
    try:
        stat = _stat(holder.pid)
    except OSError:  # e.g. hidepid=1: the process exists, but we may not look at it
        return None
    if stat is None:
        return None if _exists(holder.pid) else False  # exists: hidden from us (hidepid=2)
    state, started = stat
    return state not in ("Z", "X") and started == holder.started


def _namespace() -> str | None:
    """What pids are comparable within: this kernel boot and this pid namespace."""
    try:
        boot = (_PROC / "sys/kernel/random/boot_id").read_text().strip()
        pid_namespace = os.readlink(_PROC / "self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        return None
    return f"{boot}/{pid_namespace}"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of ``pid``; None if there is no such entry."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])  # fields 3 and 22 of proc(5)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
