"""Directory-based access: which way to read a table, and the temporary credentials for it.

A provider may offer a table for ``url`` access (Read Data from a Table: presigned file URLs),
for ``dir`` access (Generate Temporary Table Credential: cloud credentials for the table's
root, the client reads the Delta log and files itself), or both (spec "Directory-based access").
:func:`choose_access` is the pure decision; :class:`TemporaryCredentials` the wire model of the
credential answer, whose AWS, Azure and GCP shapes are all parsed, each secret held as a
``SecretStr`` (never in a repr) and registered with the redactor once received.
"""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr, model_validator

from sharesync.sync.core.errors import UnsupportedAccessMode
from sharesync.sync.core.redact import register_secret
from sharesync.sync.protocol.wire import TableAccess, WireModel

AccessMode = Literal["url", "dir"]
AccessSetting = Literal["auto", "url", "dir"]


def offered_modes(table: TableAccess) -> frozenset[str]:
    """The modes a table offers, lower-cased; absent ``accessModes`` means url only (spec)."""
    if table.access_modes is None:
        return frozenset({"url"})
    return frozenset(m.strip().lower() for m in table.access_modes)


def choose_access(setting: AccessSetting, table: TableAccess, *, name: str) -> AccessMode:
    """How to read ``name``: its ``access`` setting against what the provider offers.

    ``auto`` reads by URL whenever the table offers it — the provider chose those files and signed
    them, it is the path every provider implements, and it needs no cloud SDK — and by directory
    only when the table offers nothing else (docs/protocol-support.md, "Access modes").
    """
    offered = offered_modes(table)
    if setting == "auto":
        if "url" in offered:
            return "url"
        if "dir" in offered:
            return "dir"
    elif setting in offered:
        if setting == "dir" and not table.location:
            raise UnsupportedAccessMode(
                f"{name}: the provider offers directory access but sends no table location; "
                "set access: url (or auto) for this table, or ask the provider to fix its metadata"
            )
        return setting
    known = sorted(offered & {"url", "dir"})
    if not known:
        raise UnsupportedAccessMode(
            f"{name}: the provider offers no access mode sharesync knows (accessModes: {sorted(offered)}); "
            "ask the provider to offer url or dir access"
        )
    raise UnsupportedAccessMode(
        f"{name}: access: {setting} is set but the provider offers only {' and '.join(known)} access "
        f"to this table; set access: auto (or {known[0]}) for it"
    )


class AwsTempCredentials(WireModel):
    access_key_id: SecretStr
    secret_access_key: SecretStr
    session_token: SecretStr


class AzureUserDelegationSas(WireModel):
    sas_token: SecretStr


class GcpOauthToken(WireModel):
    oauth_token: SecretStr


class TemporaryCredentials(WireModel):
    """Read access to ``location`` until ``expiration_time`` (epoch ms); exactly one credential kind."""

    location: str
    aws_temp_credentials: AwsTempCredentials | None = None
    azure_user_delegation_sas: AzureUserDelegationSas | None = None
    gcp_oauth_token: GcpOauthToken | None = None
    expiration_time: int

    @model_validator(mode="after")
    def _exactly_one(self) -> TemporaryCredentials:
        kinds = [self.aws_temp_credentials, self.azure_user_delegation_sas, self.gcp_oauth_token]
        if sum(k is not None for k in kinds) != 1:
            raise ValueError("exactly one of awsTempCredentials, azureUserDelegationSas, gcpOauthToken must be set")
        return self

    @property
    def kind(self) -> Literal["aws", "azure", "gcp"]:
        if self.aws_temp_credentials is not None:
            return "aws"
        return "azure" if self.azure_user_delegation_sas is not None else "gcp"

    def secrets(self) -> tuple[str, ...]:
        """Every secret value these credentials hold."""
        held: list[SecretStr] = []
        if self.aws_temp_credentials is not None:
            aws = self.aws_temp_credentials
            held += [aws.access_key_id, aws.secret_access_key, aws.session_token]
        if self.azure_user_delegation_sas is not None:
            held.append(self.azure_user_delegation_sas.sas_token)
        if self.gcp_oauth_token is not None:
            held.append(self.gcp_oauth_token.oauth_token)
        return tuple(s.get_secret_value() for s in held)

    def register_secrets(self) -> None:
        """Mask these credentials in every message, log line and stored row from now on."""
        for value in self.secrets():
            register_secret(value)


class TemporaryCredentialsResponse(WireModel):
    credentials: TemporaryCredentials


class TemporaryCredentialsRequest(WireModel):
    location: str | None = None  # None: the table's root; else one of its auxiliaryLocations
