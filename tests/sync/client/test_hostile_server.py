"""The local server playing a hostile provider (``tests/support/faults/hostile.py``), met by the real client.

Every byte travels over loopback HTTP: the knobs rewrite what the server sends, and the client
must refuse what cannot be applied (a repeated file action, file URLs aimed at another port),
read what the spec allows (lines in any order), and give up on a body that drips in one byte
at a time once its whole-response deadline has passed — or, sooner, once it has stayed under the
transfer-rate floor for a window (then without retrying it as if the connection had dropped).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.faults import SharingServer
from support.monotonic import FakeClock

from sharesync.sync.core.errors import ProtocolViolation, SlowTransfer, TransportError, UnsafeUrl
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.download import Downloader, DownloadOptions
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.transport import Timeouts

from .loopback import Loopback, Reply

TABLE = "samples.all_types.partitioned"
ONCE = RetryPolicy(max_attempts=1)
IMPATIENT = Timeouts(read=20, total=0.5)
# The whole-response deadline stays at its 600 s: only the rate floor (1 KiB/s) can stop a drip,
# over a window of 0.3 s instead of 30.
FLOORED = Timeouts(read=20, floor_seconds=0.3)
DRIP = 0.01  # seconds per byte: about 100 B/s, far under the floor


def patient(clock: FakeClock) -> RetryPolicy:
    """Five attempts, whose waits are recorded instead of slept: a retried drip would show in ``clock.sleeps``."""
    return RetryPolicy(max_attempts=5, sleep=clock.sleep, async_sleep=clock.async_sleep, clock=clock)


@pytest.fixture
def client(sharing_server: SharingServer) -> Iterator[SharingClient]:
    with SharingClient(load_profile(sharing_server.profile_path), retry=ONCE, timeouts=IMPATIENT) as c:
        yield c


def test_a_repeated_file_action_is_refused(client: SharingClient, sharing_server: SharingServer) -> None:
    sharing_server.faults.repeat_file_action = True
    with pytest.raises(ProtocolViolation, match=r"the provider listed the same \w+ action of file .* twice"):
        client.changes(TABLE, starting_version=1)
    with pytest.raises(ProtocolViolation, match="the same file action of file .* twice"):
        client.query(TABLE)


def test_file_actions_in_reverse_order_are_read_whole(client: SharingClient, sharing_server: SharingServer) -> None:
    ordered = client.changes(TABLE, starting_version=1)
    sharing_server.faults.reverse_file_actions = True
    reversed_ = client.changes(TABLE, starting_version=1)
    versions = [f.version for f in reversed_.files]  # type: ignore[union-attr]
    assert versions != sorted(versions), "the knob did not reorder anything: the test proves nothing"
    assert sorted(f.id for f in reversed_.files) == sorted(f.id for f in ordered.files)


def test_an_omitted_version_is_not_visible_in_the_answer(client: SharingClient, sharing_server: SharingServer) -> None:
    """What the protocol cannot catch (docs/guarantees.md, "Untrusted provider input"): the answer
    without a version's files is a well-formed answer for a version that changed no data."""
    full = client.changes(TABLE, starting_version=1)
    version = full.files[0].version  # type: ignore[union-attr]
    sharing_server.faults.omit_version = version
    cut = client.changes(TABLE, starting_version=1)
    assert version not in {f.version for f in cut.files}  # type: ignore[union-attr]
    assert len(cut.files) < len(full.files)


def test_file_urls_aimed_at_another_loopback_port_are_never_requested(
    client: SharingClient, sharing_server: SharingServer, tmp_path: Path
) -> None:
    with Loopback(lambda seen: Reply(200, {"Code": "Success", "AccessKeyId": "ASIA-not-for-you"})) as metadata:
        sharing_server.faults.file_url_origin = metadata.url  # stands for http://169.254.169.254
        result = client.query(TABLE)
        assert all(f.url.startswith(metadata.url + "/") for f in result.files)
        downloader = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=ONCE))
        with pytest.raises(UnsafeUrl, match=r"refused the file URL the provider gave: it points at 127\.0\.0\.1:\d+"):
            downloader.download(list(result.files))
        assert metadata.seen == []
    assert list(tmp_path.iterdir()) == []


def test_an_api_answer_that_drips_is_cut_off_at_its_deadline(
    client: SharingClient, sharing_server: SharingServer
) -> None:
    sharing_server.faults.drip_seconds = 0.01  # a ~2 kB answer would take ~20 s
    with pytest.raises(TransportError, match=r"timed out .*not complete after 0\.5 s \(the bound on a whole response\)"):
        client.metadata(TABLE)


def test_a_file_that_drips_is_cut_off_at_its_deadline(
    client: SharingClient, sharing_server: SharingServer, tmp_path: Path
) -> None:
    files = list(client.query(TABLE).files)[:1]
    sharing_server.faults.drip_seconds = 0.01
    downloader = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=ONCE, timeouts=IMPATIENT))
    deadline = IMPATIENT.download_deadline(files[0].size)
    with pytest.raises(TransportError, match=f"not complete after {deadline:.3g} s; the storage is stalled"):
        downloader.download(files)
    assert list(tmp_path.iterdir()) == []


def test_an_api_answer_under_the_rate_floor_is_abandoned_and_not_retried(sharing_server: SharingServer) -> None:
    clock = FakeClock()
    profile = load_profile(sharing_server.profile_path)
    with SharingClient(profile, retry=patient(clock), timeouts=FLOORED, provider="partner") as client:
        sharing_server.faults.drip_seconds = DRIP
        with pytest.raises(SlowTransfer) as caught:
            client.changes(TABLE, starting_version=1)
    message = str(caught.value)
    assert message.startswith(f"changes of {TABLE} (1..latest): provider partner ({sharing_server.base_url}) sent")
    assert "under the floor of 1 KiB/s for 0.3 s; abandoned, not retried: it is stalled" in message, message
    assert "raise 'min_rate_seconds' under providers.partner in the config" in message, message
    assert clock.sleeps == [], "a drip was retried like a dropped connection"


def test_a_file_under_the_rate_floor_is_abandoned_and_not_retried(
    sharing_server: SharingServer, tmp_path: Path
) -> None:
    clock = FakeClock()
    with SharingClient(load_profile(sharing_server.profile_path), retry=ONCE) as client:
        files = list(client.query(TABLE).files)[:1]
        downloader = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=patient(clock), timeouts=FLOORED, provider="partner"))
    sharing_server.faults.drip_seconds = DRIP
    with pytest.raises(SlowTransfer, match=r"^download file .*: the file storage of provider partner sent the answer"):
        downloader.download(files)
    assert clock.sleeps == [], "a drip was retried like a dropped connection"
    assert list(tmp_path.iterdir()) == []
