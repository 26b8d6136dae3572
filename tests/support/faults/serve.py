"""``python -m support.faults.serve serve ROOT [fault flags]``: ``sharesync serve`` misbehaving on purpose.

The production command has no fault flags; this test-only entry point (run with ``tests/`` on
``PYTHONPATH``) is the same command — same options, same error lines and exit codes, through the
same CLI group — plus one flag per :class:`~support.faults.knobs.Faults` knob worth setting by
hand, handed to the server as its hooks. For manual fault testing and the tests of the flags.
"""

from __future__ import annotations

from typing import Any

import click
from pydantic import ValidationError

from sharesync.sync.cli.main import LazyGroup, cli
from sharesync.sync.cli.serve import serve as production_serve
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.redact import install_log_redaction
from support.faults.knobs import Faults

# The destination names are the fields of Faults.
FAULT_OPTIONS: list[click.Parameter] = [
    click.Option(["--error-rate"], default=0.0, type=click.FloatRange(0, 1), help="Share of API calls that fail."),
    click.Option(["--error-status"], default=503, show_default=True, help="Status of injected failures."),
    click.Option(["--retry-after"], default=None, type=float, help="Retry-After seconds on injected failures."),
    click.Option(["--truncate-stream"], is_flag=True, help="Cut NDJSON responses in the middle of their last line."),
    click.Option(["--drop-end-stream-action"], is_flag=True, help="Leave out the endStreamAction line."),
    click.Option(["--drop-connection"], is_flag=True, help="Drop the connection after the first NDJSON line."),
    click.Option(["--end-stream-error"], default=None, help="errorMessage to put into endStreamAction."),
    click.Option(
        ["--download-delay", "download_delay_seconds"], default=0.0, help="Seconds to wait before each download."
    ),
    click.Option(["--file-size-delta"], default=0, help="Serve files this many bytes longer (>0) or shorter (<0)."),
    click.Option(["--drop-file-connection"], is_flag=True, help="Drop file downloads half way."),
    # Vacuumed history as a real provider shows it (reproduce what a provider's VACUUM does to a sync).
    click.Option(
        ["--unchecked-presign"],
        is_flag=True,
        help="Presign without checking files exist (as the reference server does): vacuumed files answer 404.",
    ),
    click.Option(
        ["--gone-file", "gone_files"],
        multiple=True,
        metavar="FRAGMENT",
        help="Downloads of files whose path contains FRAGMENT (e.g. _change_data/) answer --gone-status. Repeatable.",
    ),
    click.Option(
        ["--gone-status"], default=404, show_default=True, help="Status of --gone-file downloads: 404 or 410."
    ),
    click.Option(
        ["--history-error"],
        default=None,
        metavar="KIND",
        help="Answer /changes with a reference server's history "
        "error: table_files_missing, log_truncated, version_not_found or change_data_file_not_found.",
    ),
    click.Option(["--seed"], default=0, help="Seed of the fault RNG."),
]
_FAULT_NAMES = {option.name for option in FAULT_OPTIONS}


def _serve_with_faults(**options: Any) -> None:
    flags = {name: options.pop(name) for name in _FAULT_NAMES}
    try:
        faults = Faults(**flags)
    except ValidationError as exc:
        raise ConfigError(f"serve: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    assert production_serve.callback is not None
    production_serve.callback(**options, hooks=faults)


serve = click.Command(
    "serve",
    params=[*production_serve.params, *FAULT_OPTIONS],
    callback=_serve_with_faults,
    help=production_serve.help,
)


class _FaultyGroup(LazyGroup):
    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return serve if cmd_name == "serve" else super().get_command(ctx, cmd_name)


def main() -> None:
    """The ``sharesync`` group with this ``serve`` in place of the production one."""
    install_log_redaction()
    group = _FaultyGroup(name="sharesync", params=cli.params, callback=cli.callback)
    group.main(prog_name="sharesync", obj={"restartable": False})


if __name__ == "__main__":
    main()
