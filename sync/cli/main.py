"""Entry point of the ``sharesync`` command.

Commands are imported only when invoked (a lazy click group) so that ``sharesync sync``
with nothing to do never pays for importing Spark or Dagster. Exit codes: 0 all fine,
1 a table failed (the others still ran), 2 the command could not run — usage, config, profile,
provider or state-store error — or a table's config is wrong against its shared table (a key
or column it lacks; the others still ran), 130 interrupted by Ctrl+C. Every error is one
redacted line on stderr.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import IO, Any, NoReturn

import click

from sharesync.sync.cli.repeat import PASSES_DONE_VARIABLE, RestartProcess, carry_stop_across_exec, restart_marker
from sharesync.sync.core.errors import SharesyncError, exception_line
from sharesync.sync.core.redact import install_log_redaction, redact

# command name → "module:attribute"; each module owns one command (or group).
COMMANDS: dict[str, str] = {
    "db": "sharesync.sync.cli.db:db",
    "serve": "sharesync.sync.cli.serve:serve",
    "discover": "sharesync.sync.cli.discover:discover",
    "sync": "sharesync.sync.cli.syncing:sync_command",
    "status": "sharesync.sync.cli.syncing:status_command",
    "backfill": "sharesync.sync.cli.syncing:backfill_command",
    "reset": "sharesync.sync.cli.syncing:reset_command",
    "verify": "sharesync.sync.cli.verify:verify_command",
    "preview": "sharesync.sync.cli.preview:preview",
    "demo": "sharesync.sync.cli.demo:demo",
    "optimize": "sharesync.sync.cli.maintenance_commands:optimize_command",
    "vacuum": "sharesync.sync.cli.maintenance_commands:vacuum_command",
}

EXIT_OK, EXIT_TABLE_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl+C stopped

# What Ctrl+C left behind, by command: a sync's tables carry on from their checkpoints.
_INTERRUPTED = {
    "sync": "sync interrupted (Ctrl+C); nothing is half-applied: the next sync continues from the checkpoint",
    "backfill": "backfill interrupted (Ctrl+C); nothing is half-applied: the next sync continues from the checkpoint",
}


class OneLineUsageError(click.UsageError):
    """A usage error as every other error of the CLI: one line on stderr (click prints four)."""

    def show(self, file: IO[str] | None = None) -> None:
        command = self.ctx.command_path if self.ctx is not None else "sharesync"
        click.echo(f"error: {redact(self.format_message())} (see '{command} --help')", err=True)


def _one_line(exc: click.UsageError) -> click.UsageError:
    """``exc`` shown on one line; running a group without a command still shows its help."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc
    return OneLineUsageError(exc.format_message(), exc.ctx)


class LazyGroup(click.Group):
    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: object
    ) -> click.Context:
        try:  # the top-level options: ``sharesync --bogus``
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SharesyncError as exc:
            # A command that could not even start (bad config or profile, unreachable state store)
            # exits 2; per-table failures (an unreachable provider too) are the command's (exit 1).
            fail(str(exc))
        except click.UsageError as exc:  # a command's arguments, or no such command (exit 2)
            raise _one_line(exc) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own (exit 1), --help's exit 0, Ctrl+C at a prompt
        except KeyboardInterrupt:  # one line and 130, not click's "Aborted!" and 1
            command = ctx.invoked_subcommand or ""
            click.echo(_INTERRUPTED.get(command, f"{command} interrupted (Ctrl+C)".strip()), err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - a library's error (deltalake, Spark): one line too
            logging.getLogger("sharesync.cli").debug("the command failed", exc_info=True)
            fail(f"{exception_line(exc)[0]} (run with -vv for the traceback)")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (default: $SHARESYNC_CONFIG or ./sharesync.yaml).",
)
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: int) -> None:
    """Keep Delta Sharing tables in sync with your own Delta tables."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    ctx.ensure_object(dict)["config_file"] = config_file


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one redacted line to stderr and exit."""
    click.echo(f"error: {redact(message)}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None, *, restartable: bool = False) -> Any:
    """``restartable``: a command may end by asking for a fresh process (:class:`RestartProcess`),
    which only the console script can give it."""
    install_log_redaction()
    return cli.main(args=argv, prog_name="sharesync", standalone_mode=True, obj={"restartable": restartable})


def run() -> NoReturn:
    """The ``sharesync`` console script: :func:`main`, then leave at once.

    When a command returns, everything it did is committed (Delta commits, checkpoints, run
    rows) and printed. What is left is stopping the embedded engine and tearing down an
    interpreter with pyspark, pandas and Arrow loaded: about 0.8 s of every pass that used the
    engine (bench/README.md). So output and logs are flushed (a remote engine's session was
    released when the command's engine closed), and the process ends with the command's
    exit code. Tests call :func:`main`, which returns normally.
    """
    environment = dict(os.environ)  # before a command exports anything (storage settings): a restart's start
    restart: RestartProcess | None = None
    try:
        main(restartable=True)
        code = EXIT_OK
    except SystemExit as exc:
        code = exit_code(exc)
    except RestartProcess as asked:
        restart, code = asked, EXIT_OK
    logging.shutdown()
    if restart is not None:
        click.echo(f"restarting the process after pass {restart.passes_done}: {restart.reason}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if restart is not None:
        environment[PASSES_DONE_VARIABLE] = restart_marker(restart.passes_done)
        carry_stop_across_exec(restart.stop)
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)
    os._exit(code)


def exit_code(exc: SystemExit) -> int:
    """What the interpreter would exit with: a message (not a number) goes to stderr, code 1."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or EXIT_OK
    print(exc.code, file=sys.stderr)
    return 1


if __name__ == "__main__":  # ``python -m sharesync.sync.cli.main``: the console script's behaviour
    run()
