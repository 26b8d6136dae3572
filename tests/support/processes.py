"""Stopping a server subprocess a test started, and the thread reading its log."""

from __future__ import annotations

import subprocess
import threading


def stop_process(process: subprocess.Popen[str], reader: threading.Thread | None, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; wait for the log reader and close the pipe."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if reader is not None:
        reader.join(grace)  # the log ends with the process
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
