"""A change feed (or snapshot) that cannot be applied as sent is refused before anything is staged.

The spec lets lines come in any order, so versions out of order are read (and sorted), never
refused; a repeated file action (its rows would be applied twice) and a version before the
range asked for (already applied) are protocol violations that name the file and version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.changes import check_change_feed, select_change_files
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.wire import AddFile, CdfFile, RemoveFile

from .conftest import end, file, metadata, ndjson, protocol

TABLE = "share.schema.t"
Make = Callable[..., SharingClient]


def _serving(*lines: dict[str, Any], version: int = 3) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: ndjson([protocol(), metadata(), *lines, end()], version=version)


def test_a_repeated_add_is_refused_naming_the_file_and_version(make_client: Make) -> None:
    client = make_client(_serving(file("a", kind="add", version=3), file("b", kind="add", version=3),
                                  file("a", kind="add", version=3)))  # fmt: skip
    with pytest.raises(ProtocolViolation) as info:
        client.changes(TABLE, starting_version=3, ending_version=4)
    assert str(info.value) == (
        "changes of share.schema.t (3..4): the provider listed the same add action of file a (version 3) twice, "
        "so its rows would be applied twice; nothing was applied — run again, and report it to the provider "
        "if it persists"
    )


def test_a_file_repeated_in_a_snapshot_is_refused(make_client: Make) -> None:
    client = make_client(_serving(file("a"), file("b"), file("a")))
    with pytest.raises(ProtocolViolation, match="the same file action of file a .* twice"):
        client.query(TABLE)


def test_a_version_before_the_start_is_refused(make_client: Make) -> None:
    client = make_client(_serving(file("a", kind="add", version=5), file("old", kind="cdf", version=4), version=5))
    with pytest.raises(ProtocolViolation, match="listed file old of version 4, before the first version asked for"):
        client.changes(TABLE, starting_version=5)


def test_the_same_file_as_remove_and_add_of_one_version_is_no_repeat(make_client: Make) -> None:
    # A deletion vector changed: remove(f) + add(f) in one version, one data file (spec: DV updates).
    client = make_client(_serving(file("f", kind="remove", version=3), file("f", kind="add", version=3),
                                  file("f", kind="add", version=4)))  # fmt: skip
    assert [type(f) for f in client.changes(TABLE, starting_version=3).files] == [RemoveFile, AddFile, AddFile]


def test_versions_out_of_order_are_read_in_version_order(make_client: Make) -> None:
    lines = [file("c5", kind="cdf", version=5), file("a3", kind="add", version=3), file("r4", kind="remove", version=4)]
    shuffled = make_client(_serving(*lines)).changes(TABLE, starting_version=3)
    ordered = make_client(_serving(*sorted(lines, key=lambda x: next(iter(x.values()))["version"])))
    expected = select_change_files(ordered.changes(TABLE, starting_version=3).files)  # type: ignore[arg-type]
    chosen = select_change_files(shuffled.files)  # type: ignore[arg-type]
    assert [(c.commit_version, c.id) for c in chosen] == [(3, "a3"), (4, "r4"), (5, "c5")]
    assert [(c.commit_version, c.id, c.change_type) for c in chosen] == [
        (c.commit_version, c.id, c.change_type) for c in expected
    ]


def test_a_start_given_as_a_timestamp_checks_repeats_only() -> None:
    one = CdfFile(url="https://b/x", id="x", size=1, version=1, timestamp=0)
    check_change_feed([one], None, "changes")
    with pytest.raises(ProtocolViolation, match="cdf action of file x"):
        check_change_feed([one, one], None, "changes")
    check_change_feed([one, AddFile(url="https://b/x", id="x", size=1, version=2, timestamp=0)], None, "changes")


@pytest.mark.parametrize(
    ("line", "wording"),
    [
        (file("a", size=-1), "invalid 'file' action: size: Input should be greater than or equal to 0"),
        (file("a", kind="add", version=-2), "invalid 'add' action: version: Input should be greater than or equal to 0"),
    ],
)
def test_a_negative_size_or_version_is_refused(make_client: Make, line: dict[str, Any], wording: str) -> None:
    with pytest.raises(ProtocolViolation, match=wording):
        make_client(_serving(line)).query(TABLE)
