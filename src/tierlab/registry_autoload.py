"""Import every module of a package so that its `@REGISTRY.register` decorators run:
adding a policy or monitor means adding one file."""
from __future__ import annotations

import importlib
import pkgutil


def import_all(package_name: str, package_path, skip=()) -> None:
    for info in pkgutil.iter_modules(package_path):
        if info.name.startswith("_") or info.name in skip:
            continue
        importlib.import_module(f"{package_name}.{info.name}")
