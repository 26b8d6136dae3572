"""A provider parquet file whose footer declares far more decoded data than its bytes can hold is
refused before any page is read (a decompression bomb); ordinary files pass untouched."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sharesync.sync.core.changefeed import ChangeType
from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.changes import ChangeFile
from sharesync.sync.protocol.wire import File, StructField, StructType
from sharesync.sync.staging import files
from sharesync.sync.staging.files import StageLayout, check_expansion, stage_file

MiB = 1024 * 1024


def _zeros(path: Path, mib: int) -> Path:
    """``mib`` MiB of zero bytes in one binary column, zstd-compressed without dictionaries: a few kB."""
    column = pa.array([b"\0" * MiB] * mib, pa.binary())
    pq.write_table(pa.table({"id": pa.array(range(mib), pa.int64()), "blob": column}), path,
                   compression="zstd", use_dictionary=False)  # fmt: skip
    return path


def test_a_footer_declaring_over_a_thousand_times_its_size_is_refused(tmp_path: Path) -> None:
    bomb = _zeros(tmp_path / "bomb.parquet", 16)
    stored = bomb.stat().st_size
    assert stored * 1000 < 16 * MiB, f"the sample compresses too badly to be a bomb ({stored} bytes)"
    with pytest.raises(ProtocolViolation, match=r"file f: its \d+ bytes declare \d+ bytes of decoded data, more than 1000"):
        check_expansion(pq.read_metadata(bomb), stored, "file f", floor=MiB)


def test_under_the_floor_or_the_ratio_a_file_passes(tmp_path: Path) -> None:
    bomb = _zeros(tmp_path / "bomb.parquet", 16)
    check_expansion(pq.read_metadata(bomb), bomb.stat().st_size, "file f")  # 16 MiB: under the 1 GiB floor
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": list(range(10_000)), "x": [f"row {i}" for i in range(10_000)]}), plain)
    check_expansion(pq.read_metadata(plain), plain.stat().st_size, "file p", floor=0)  # an ordinary ratio


def test_staging_refuses_a_bomb_before_reading_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _zeros(tmp_path / "bomb.parquet", 16)
    schema = StructType(fields=[StructField(name="id", type="long", nullable=True, metadata={})])
    change = ChangeFile(File(url="https://x/f", id="f", size=source.stat().st_size), ChangeType.INSERT, 3, 0)
    layout = StageLayout.build(schema, [])
    assert stage_file(source, tmp_path / "ok.parquet", change, layout) == 16  # under the 1 GiB floor
    monkeypatch.setattr(files, "EXPANSION_FLOOR", MiB)  # a 16 MiB bomb stands for a 16 GiB one
    with pytest.raises(ProtocolViolation, match="file f \\(version 3\\): .* refused as a decompression bomb"):
        stage_file(source, tmp_path / "staged.parquet", change, layout)
    assert not (tmp_path / "staged.parquet").exists()
