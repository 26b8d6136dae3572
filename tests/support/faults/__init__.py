"""Fault injection for the local sharing server: a test double, kept next to the tests that use it.

:class:`Faults` holds the knobs (:mod:`.knobs`), :mod:`.middleware` and :mod:`.hostile` apply
them, :class:`SharingServer` is the production server with them plugged in as its hooks
(:mod:`.server`), and ``python -m support.faults.serve`` is ``sharesync serve`` with fault flags.
The production package never imports any of it (a contract in pyproject's ``[tool.importlinter]``).
"""

from support.faults.knobs import Faults
from support.faults.middleware import HISTORY_ERRORS, HistoryError
from support.faults.server import SharingServer

__all__ = ["HISTORY_ERRORS", "Faults", "HistoryError", "SharingServer"]
