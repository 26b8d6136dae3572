"""What a failure says: one redacted line, whatever the library put in its message."""

from __future__ import annotations

from sharesync.pipelines.run.failures import describe


def test_a_library_error_is_described_by_its_first_line() -> None:
    rust = RuntimeError(
        "Generic DeltaTable error: Invalid JSON in log record, version=3\n\nStack backtrace:\n   0: deltalake::x\n"
    )
    assert describe(rust) == (
        "RuntimeError: Generic DeltaTable error: Invalid JSON in log record, version=3 (more in the log at -v)"
    )
    assert (
        describe(ValueError("https://b/f.parquet?sig=secret-1 went away"))
        == "ValueError: https://b/f.parquet?*** went away"
    )
    assert describe(KeyError()) == "KeyError: "
