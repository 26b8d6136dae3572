"""``sharesync serve --remote-table NAME=URI[@MODES]``: the form, and what a mistake says."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sharesync.sync.cli.main import cli
from sharesync.sync.server.settings import RemoteTableSpec


@pytest.mark.parametrize(
    ("text", "modes"),
    [
        ("sh.s.t=s3://b/p/t", ("url", "dir")),
        ("sh.s.t=s3://b/t@dir", ("dir",)),
        ("sh.s.t=s3a://b/t@url, dir", ("url", "dir")),
        ("sh.s.t=abfss://c@acct.dfs.core.windows.net/p/t", ("url", "dir")),  # the "@" of an Azure root
        ("sh.s.t=wasbs://c@acct.blob.core.windows.net/t@dir", ("dir",)),
        ("sh.s.t=gs://b/t@dir", ("dir",)),
    ],
)
def test_the_form_names_the_table_its_root_and_its_modes(text: str, modes: tuple[str, ...]) -> None:
    spec = RemoteTableSpec.parse(text)
    assert spec.name == "sh.s.t" and spec.location.endswith("/t") and spec.access_modes == modes


@pytest.mark.parametrize(
    ("text", "said"),
    [("s3://b/t", "is not share.schema.table=URI"), ("sh.t=s3://b/t", "is not"), ("sh.s.t=/data/t", "is not"),
     ("sh.s.t=s3://b/t@ftp", "access modes are url and/or dir")],
)  # fmt: skip
def test_a_wrong_form_is_refused_by_the_command_in_one_line(tmp_path: object, text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        RemoteTableSpec.parse(text)
    result = CliRunner().invoke(cli, ["serve", str(tmp_path), "--remote-table", text])
    assert result.exit_code == 2 and "--remote-table" in result.output and said in result.output
