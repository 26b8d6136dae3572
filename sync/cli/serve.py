"""``sharesync serve ROOT``: share the Delta tables under ROOT over the Delta Sharing protocol.

For trying sharesync without a provider, demos and manual fault testing: every
``ROOT/<share>/<schema>/<table>`` directory with a ``_delta_log`` is shared. ``--profile-out``
writes a profile file ready for ``sharesync`` or any Delta Sharing client; fault flags make the
server misbehave on purpose (see ``sharesync.sync.server.faults.Faults``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sharesync.sync.core.errors import ConfigError

if TYPE_CHECKING:
    from sharesync.sync.server.asyncqueries import Outcome


@click.command()
@click.argument("root", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8080, show_default=True, type=int, help="Port; 0 picks a free one.")
@click.option("--token", default=None, help="Bearer token clients must send (default: a random one).")
@click.option("--prefix", default="/delta-sharing", show_default=True, help="URL prefix of the API.")
@click.option("--profile-out", type=click.Path(dir_okay=False, path_type=Path), help="Write a profile file here.")
# Fault flags: the destination names are the fields of sharesync.sync.server.faults.Faults.
@click.option("--url-ttl", "url_ttl_seconds", default=3600.0, show_default=True, help="Presigned URL lifetime, s.")
@click.option("--error-rate", default=0.0, type=click.FloatRange(0, 1), help="Share of API calls that fail.")
@click.option("--error-status", default=503, show_default=True, help="Status of injected failures.")
@click.option("--retry-after", default=None, type=float, help="Retry-After seconds on injected failures.")
@click.option("--truncate-stream", is_flag=True, help="Cut NDJSON responses in the middle of their last line.")
@click.option("--drop-end-stream-action", is_flag=True, help="Leave out the endStreamAction line.")
@click.option("--drop-connection", is_flag=True, help="Drop the connection after the first NDJSON line.")
@click.option("--end-stream-error", default=None, help="errorMessage to put into endStreamAction.")
@click.option("--download-delay", "download_delay_seconds", default=0.0, help="Seconds to wait before each download.")
@click.option("--file-size-delta", default=0, help="Serve files this many bytes longer (>0) or shorter (<0).")
@click.option("--drop-file-connection", is_flag=True, help="Drop file downloads half way.")
# Vacuumed history as a real provider shows it (reproduce what a provider's VACUUM does to a sync).
@click.option(
    "--unchecked-presign",
    is_flag=True,
    help="Presign without checking files exist (as the reference server does): vacuumed files answer 404 on download.",
)
@click.option(
    "--gone-file",
    "gone_files",
    multiple=True,
    metavar="FRAGMENT",
    help="Downloads of files whose path contains FRAGMENT (e.g. _change_data/) answer --gone-status. Repeatable.",
)
@click.option("--gone-status", default=404, show_default=True, help="Status of --gone-file downloads: 404 or 410.")
@click.option(
    "--history-error",
    default=None,
    metavar="KIND",
    help="Answer /changes with a reference server's history "
    "error: table_files_missing, log_truncated, version_not_found or change_data_file_not_found.",
)
@click.option("--seed", default=0, help="Seed of the fault RNG.")
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
    **fault_flags: Any,
) -> None:
    """Share the Delta tables under ROOT (ROOT/<share>/<schema>/<table>) until interrupted."""
    from pydantic import ValidationError

    from sharesync.sync.core.storage import StoreKind, settings_from_environment
    from sharesync.sync.core.store_urls import table_root
    from sharesync.sync.server.catalog import Catalog
    from sharesync.sync.server.faults import Faults
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
        faults = Faults(**fault_flags)
        server = SharingServer(
            root, token=token, host=host, port=port, prefix=prefix, faults=faults, remote_tables=remote,
            credentials_role_arn=credentials_role, credential_ttl_seconds=credential_ttl,
            object_store=own.get(StoreKind.S3), azure_store=own.get(StoreKind.AZURE), gcs_store=own.get(StoreKind.GCS),
        )  # fmt: skip
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
