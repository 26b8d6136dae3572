"""Measuring one child process from outside: wall time, peak RSS and CPU time from ``wait4``.

Every measured step of the benchmark is a fresh child process: the harness takes its wall time
(monotonic clock around ``fork`` … ``os.wait4``) and its peak RSS and CPU time from ``wait4``'s
rusage (the child's own ``ru_maxrss``: sharesync's embedded Sail engine runs inside that process,
so it is included). A child above :data:`RSS_LIMIT_KB` is killed and the run stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
SHARESYNC = str(Path(sys.executable).parent / "sharesync")
# A child above this is killed and the run stops; ``bench.run --rss-limit-gib`` sets it for its run.
RSS_LIMIT_KB = 16 * 2**20


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Measure:
    wall: float
    maxrss_mib: float
    cpu: float  # user + system seconds of the child
    server_cpu: float  # CPU seconds the sharing server spent meanwhile
    load: float  # 1-minute load average when the run started
    output: dict = field(default_factory=dict)  # the child's last JSON line, if any
    engine_rss_mib: float = 0.0  # --engine spark: the Spark server's peak VmRSS sampled during the run
    engine_cpu: float = 0.0  # --engine spark: CPU seconds the Spark server spent during the run



def process_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


# Children are started by a tiny launcher, never forked from this process directly: on Linux a
# child's ru_maxrss starts at the RSS of the process it was forked from (exec records the old
# mm's high-water mark), so a child of this harness (which may have generated a 1 GB workload)
# would report at least the harness's size. The launcher is a bare ``python -I -S`` (~10 MiB,
# reported as the floor); it forks, execs the real child and reports the child's wait4 rusage.
_LAUNCHER = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
fd = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
began = time.monotonic()
pid = os.fork()
if pid == 0:
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(spec["cwd"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])
killed = False
while True:  # poll (20 ms) so a runaway child can be stopped before it takes the machine down
    done, status, ru = os.wait4(pid, os.WNOHANG)
    if done:
        break
    wall = time.monotonic() - began
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        rss = 0
    if rss > spec["rss_limit_kb"] and not killed:
        os.kill(pid, 9)
        killed = True
    time.sleep(0.02)
wall = time.monotonic() - began
print(json.dumps({"wall": wall, "status": os.waitstatus_to_exitcode(status), "maxrss_kb": ru.ru_maxrss,
                  "cpu": ru.ru_utime + ru.ru_stime, "killed_for_rss": killed}))
"""


def run_child(
    argv: list[str],
    *,
    log_to: Path,
    env: dict[str, str] | None = None,
    server_pid: int | None = None,
    check: bool = True,
) -> Measure:
    """Run ``argv`` to completion; wall time, peak RSS and CPU from ``wait4`` (via the launcher)."""
    log_to.parent.mkdir(parents=True, exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("SHARESYNC_")}
    child_env.update(env or {})
    load = os.getloadavg()[0]
    server_before = process_cpu(server_pid)
    spec = {"argv": argv, "env": child_env, "cwd": str(REPO), "log": str(log_to), "rss_limit_kb": RSS_LIMIT_KB}
    done = subprocess.run([PYTHON, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"launcher failed: {done.stderr}")
    usage = json.loads(done.stdout)
    if usage["killed_for_rss"]:
        raise SystemExit(f"child killed at {RSS_LIMIT_KB / 2**20:.1f} GiB RSS (--rss-limit-gib): {' '.join(argv)}")
    if check and usage["status"] != 0:
        tail = log_to.read_text(errors="replace")[-3000:]
        raise SystemExit(f"child failed ({usage['status']}): {' '.join(argv)}\n{tail}")
    output: dict = {}
    for line in reversed(log_to.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                output = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    return Measure(
        usage["wall"], usage["maxrss_kb"] / 1024, usage["cpu"], process_cpu(server_pid) - server_before, load, output
    )


def rss_floor(work: Path) -> float:
    """Peak RSS the launcher reports for a do-nothing child (``/bin/true``): the measurement floor."""
    return run_child(["/bin/true"], log_to=work / "logs" / "floor.log").maxrss_mib

