"""Plugins: policies, workloads, monitors, allocation policies and machines registered
from outside the package, without forking it. A plugin is a module whose import runs
its registrations (`@POLICIES.register("name")`, from `tierlab.policies`; a policy may
subclass a shipped one, `from tierlab.policies.static import Static`). Two ways in:

- an installed distribution's entry points in the group `tierlab.policies` (or
  `tierlab.workloads`, `tierlab.monitors`, `tierlab.allocs`, `tierlab.machines`):
  `[project.entry-points."tierlab.policies"] my-policy = "my_package.policy"`;
- a path or module name: `--import my_policy.py` on `run`, `compare`, `reproduce` and
  `list`, or `TIERLAB_IMPORT` (entries separated by os.pathsep). `--import` extends
  `TIERLAB_IMPORT`, so worker processes load the same plugins: the local pool's, and
  Dask's when its workers start with it set (`--cluster local:N` starts them so).

Plugins load once per process, at the first look-up of any registry. Their sources
join the run key (`digest`), so `--resume` re-runs what an edited plugin made.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

from .errors import TierlabError

GROUPS = ("tierlab.policies", "tierlab.workloads", "tierlab.monitors", "tierlab.allocs",
          "tierlab.machines")
ENV = "TIERLAB_IMPORT"
_files: dict[str, str] = {}  # what was loaded (resolved path or module name) -> its file
_state = {"entry_points": False, "loading": False}


def env_items() -> list[str]:
    """The entries of TIERLAB_IMPORT, in order."""
    return [x for x in os.environ.get(ENV, "").split(os.pathsep) if x.strip()]


def _key(item: str) -> str:
    return str(Path(item).resolve()) if item.endswith(".py") else item


def add(items) -> None:
    """Load `items` (paths of .py files or module names) and put them in TIERLAB_IMPORT
    for the processes this one starts."""
    have = env_items()
    for item in items:
        if not item.endswith(".py") and not re.fullmatch(r"[A-Za-z_][\w.]*", item):
            raise TierlabError(f"bad --import {item!r}: expected a .py file or a module "
                               "name")
        if item.endswith(".py") and not Path(item).is_file():
            raise TierlabError(f"bad --import {item!r}: no such file")
        if _key(item) not in have:
            have.append(_key(item))
    os.environ[ENV] = os.pathsep.join(have)
    load()


def load() -> None:
    """Load the entry points (once) and every TIERLAB_IMPORT entry not loaded yet."""
    if _state["loading"]:
        return
    _state["loading"] = True
    try:
        if not _state["entry_points"]:
            _state["entry_points"] = True
            for group in GROUPS:
                for ep in entry_points(group=group):
                    try:
                        obj = ep.load()
                    except Exception as e:
                        raise TierlabError(f"plugin {ep.name!r} (entry point of "
                                           f"{group}, {ep.value}) failed to load: "
                                           f"{type(e).__name__}: {e}") from None
                    mod = sys.modules.get(getattr(obj, "__module__", None) or ep.module)
                    _files[f"entry point {ep.value}"] = getattr(mod, "__file__", "") or ""
        for item in env_items():
            if _key(item) not in _files:
                _files[_key(item)] = _import(item)
    finally:
        _state["loading"] = False


def _import(item: str) -> str:
    """Import a plugin file or module; returns its file."""
    try:
        if item.endswith(".py"):
            path = Path(item).resolve()
            name = "tierlab_plugin_" + re.sub(r"\W", "_", path.stem) + "_" + \
                hashlib.sha256(str(path).encode()).hexdigest()[:8]
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or not path.is_file():
                raise FileNotFoundError(f"no such file {str(path)!r}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(item)
    except TierlabError:
        raise
    except Exception as e:
        raise TierlabError(f"plugin {item!r} ({ENV} or --import) failed to load: "
                           f"{type(e).__name__}: {e}") from None
    return getattr(mod, "__file__", "") or ""


def digest() -> str:
    """16 hex digits of SHA-256 over the loaded plugins' source files, "" without any."""
    files = sorted({f for f in _files.values() if f})
    if not files:
        return ""
    h = hashlib.sha256()
    for f in files:
        h.update(f.encode() + b"\0")
        try:
            h.update(Path(f).read_bytes() + b"\0")
        except OSError:
            pass
    return h.hexdigest()[:16]
