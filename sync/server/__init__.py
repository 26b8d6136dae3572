"""A protocol-faithful local Delta Sharing server over Delta tables on disk.

Every ``ROOT/<share>/<schema>/<table>`` directory holding a ``_delta_log`` is shared. Used by
``sharesync serve``, the demo, benchmarks, directory-based access (its log replay and signing,
in process) and tests (real HTTP, no mocks; their fault injection is a test double in
``tests/support/faults``, plugged in through ``hooks``). Module map:
``logmodel`` (what the log says, parsed) and ``deltalog`` (reading it from disk),
``deletionvectors`` (DV descriptors), ``catalog`` (which tables), ``servable_versions`` (which versions
are still available), ``negotiation`` (response format and the tables a client may read),
``snapshots`` / ``change_answers`` (answers), ``answers`` / ``delta_lines`` (wire lines, parquet and
delta format), ``streaming`` (NDJSON bodies), ``signing`` (presigned URLs and tokens),
``tokens``, ``file_skipping`` (best-effort pruning), ``hooks`` (where a test double plugs in),
``app`` (routes), ``runner`` (threads and ports),
``samples`` (provider tables for tests and demos).
"""

from sharesync.sync.server.runner import SharingServer
from sharesync.sync.server.settings import ServerSettings

__all__ = ["ServerSettings", "SharingServer"]
