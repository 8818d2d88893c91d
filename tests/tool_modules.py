"""The scripts under tools/ loaded as modules, for the tests that check them (tools/ is not a package)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_tool(name: str) -> types.ModuleType:
    """tools/``name``.py, executed afresh as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while a class is built
    spec.loader.exec_module(module)
    return module
