"""The package loads its names on first use, and its names stay the functions it exports."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True)


def test_importing_the_model_does_not_load_the_rest_of_the_package() -> None:
    _run(
        """
        import sys
        import sync.predicates.model
        loaded = sorted(m for m in sys.modules if m.startswith("sync.predicates.") or m == "sync.wire")
        assert loaded == ["sync.predicates.model"], loaded
        """
    )


def test_bind_and_evaluate_are_the_functions_even_after_their_modules_are_imported() -> None:
    _run(
        """
        import sys
        import types
        from sync.predicates.evaluate import compare
        from sync.predicates.bind import parse_where
        import sync.predicates.pruning
        import sync.predicates as package
        from sync.predicates import bind, evaluate
        assert callable(bind) and not isinstance(bind, types.ModuleType)
        assert evaluate is sys.modules["sync.predicates.evaluate"].evaluate
        assert package.bind is bind and package.evaluate is evaluate
        """
    )


def test_every_exported_name_resolves() -> None:
    _run(
        """
        import sync.predicates as package
        from sync.predicates import *  # noqa: F403
        for name in package.__all__:
            assert getattr(package, name) is not None, name
        assert package.to_spark.__module__ == "sync.predicates.spark"
        try:
            package.no_such_name
        except AttributeError:
            pass
        else:
            raise AssertionError("unknown names must raise AttributeError")
        """
    )
