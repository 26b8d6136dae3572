"""``sharesync serve ROOT``: share the Delta tables under ROOT over the Delta Sharing protocol.

For trying sharesync without a provider, demos and benchmarks: every
``ROOT/<share>/<schema>/<table>`` directory with a ``_delta_log`` is shared. ``--profile-out``
writes a profile file ready for ``sharesync`` or any Delta Sharing client. The test suite's
fault injection is not here: ``python -m support.faults.serve`` (in ``tests/``) is this command
with fault flags, passing its knobs in as the server's hooks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sharesync.sync.core.errors import ConfigError

if TYPE_CHECKING:
    from sharesync.sync.server.asyncqueries import Outcome
    from sharesync.sync.server.hooks import ServerHooks


@click.command()
@click.argument("root", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8080, show_default=True, type=int, help="Port; 0 picks a free one.")
@click.option("--token", default=None, help="Bearer token clients must send (default: a random one).")
@click.option("--prefix", default="/delta-sharing", show_default=True, help="URL prefix of the API.")
@click.option("--profile-out", type=click.Path(dir_okay=False, path_type=Path), help="Write a profile file here.")
@click.option("--url-ttl", "url_ttl_seconds", default=3600.0, show_default=True, help="Presigned URL lifetime, s.")
@click.option(
    "--async-after-polls",
    type=click.IntRange(min=0),
    default=None,
    help="Answer queries sent with asyncquery=true asynchronously, pending for this many polls.",
)
@click.option(
    "--async-outcome",
    type=click.Choice(["succeed", "fail", "expire"]),
    default="succeed",
    show_default=True,
    help="How asynchronous queries end: with their files, failed, or expired (404).",
)
@click.option(
    "--remote-table",
    "remote_tables",
    multiple=True,
    metavar="NAME=URI[@MODES]",
    help="Share the Delta table at URI (s3://, abfss://, gs://) as NAME (share.schema.table) with accessModes MODES "
    "(default url,dir; e.g. @dir). Repeatable. The server reaches the store through its standard environment "
    "variables (AWS_*, AZURE_STORAGE_*, STORAGE_EMULATOR_HOST).",
)
@click.option(
    "--credentials-role", default=None, metavar="ARN", help="STS role whose sessions are issued (dir access)."
)
@click.option("--credential-ttl", default=3600.0, show_default=True, help="expirationTime of issued credentials, s.")
def serve(
    root: Path,
    host: str,
    port: int,
    token: str | None,
    prefix: str,
    profile_out: Path | None,
    async_after_polls: int | None,
    async_outcome: Outcome,
    remote_tables: tuple[str, ...],
    credentials_role: str | None,
    credential_ttl: float,
    url_ttl_seconds: float,
    hooks: ServerHooks | None = None,
) -> None:
    """Share the Delta tables under ROOT (ROOT/<share>/<schema>/<table>) until interrupted."""
    # hooks: a test double's fault injection (tests/support/faults/serve.py); never set from the command line.
    from pydantic import ValidationError

    from sharesync.sync.core.storage import StoreKind, settings_from_environment
    from sharesync.sync.core.store_urls import table_root
    from sharesync.sync.server.catalog import Catalog
    from sharesync.sync.server.runner import SharingServer
    from sharesync.sync.server.settings import RemoteTableSpec

    if not root.is_dir():
        raise ConfigError(f"serve: ROOT '{root}' is not a directory; pass the folder holding <share>/<schema>/<table>")
    try:
        remote = tuple(RemoteTableSpec.parse(text) for text in remote_tables)
    except ValueError as exc:
        raise ConfigError(f"serve: --remote-table {exc}") from None
    kinds = {table_root(spec.location).kind for spec in remote}
    own = {kind: settings_from_environment(kind) for kind in kinds}  # each store's standard variables
    try:
        server = SharingServer(
            root,
            token=token,
            host=host,
            port=port,
            prefix=prefix,
            hooks=hooks,
            remote_tables=remote,
            credentials_role_arn=credentials_role,
            credential_ttl_seconds=credential_ttl,
            url_ttl_seconds=url_ttl_seconds,
            object_store=own.get(StoreKind.S3),
            azure_store=own.get(StoreKind.AZURE),
            gcs_store=own.get(StoreKind.GCS),
        )
        server.queries.after_polls, server.queries.outcome = async_after_polls, async_outcome
    except ValidationError as exc:
        raise ConfigError(f"serve: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None

    def ready(running: SharingServer) -> None:
        catalog = Catalog(running.root, remote)
        tables = sum(len(catalog.all_tables(share)) for share in catalog.shares())
        click.echo(f"Serving {tables} table(s) from {running.root} at {running.endpoint}")
        if profile_out is not None:
            running.write_profile(profile_out)
            click.echo(f"Profile written to {profile_out}")
        elif token is None:  # a generated token is useless unless shown; a given one the user knows
            click.echo(f"Bearer token: {running.token}")
        click.echo("Press Ctrl+C to stop.")

    try:
        server.serve_forever(on_ready=ready)
    except KeyboardInterrupt:  # Ctrl+C is how this command ends: not an abort
        click.echo("Stopped.")
    except OSError as exc:
        raise ConfigError(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
