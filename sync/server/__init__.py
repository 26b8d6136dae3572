"""A protocol-faithful local Delta Sharing server over Delta tables on disk.

Every ``ROOT/<share>/<schema>/<table>`` directory holding a ``_delta_log`` is shared. Used by
tests (real HTTP, no mocks), ``sharesync serve``, the demo and benchmarks. Module map:
``deltalog`` (log replay), ``catalog`` (which tables), ``history`` (which versions are still
available), ``snapshots`` / ``changes`` (answers), ``answers`` (wire lines), ``signing``
(presigned URLs and tokens), ``auth``, ``faults`` (knobs + middleware), ``app`` (routes),
``runner`` (threads and ports).
"""

from sharesync.sync.server.faults import Faults
from sharesync.sync.server.runner import SharingServer
from sharesync.sync.server.settings import ServerSettings

__all__ = ["Faults", "ServerSettings", "SharingServer"]
