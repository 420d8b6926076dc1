"""Which code made a result: tierlab's version and a digest of its installed source.

A sweep keys each run by its spec, its input files and this digest (sweep.py), so
`--resume` never serves a result of code that has since changed; report.html names it.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

#: tierlab's version (pyproject.toml's, which workers read from the installed package)
__version__ = "0.1.0"


PACKAGE = Path(__file__).resolve().parent


#: subpackages that render results and cannot change a run's record (tables, plots,
#: report.html, the reproductions' READMEs): an edit there keeps every run key
RENDERING = ("reports",)


@lru_cache(maxsize=None)
def source_digest(root: Path = PACKAGE) -> str:
    """16 hex digits of SHA-256 over every file of the package at `root` that can make
    a run (its modules, compiled kernels' sources and shipped data such as IDT's
    weights; `RENDERING` excluded), by relative path; caches and bytecode excluded."""
    h = hashlib.sha256()
    for p in sorted(Path(root).rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and "__pycache__" not in rel.parts and rel.parts[0] not in RENDERING \
                and p.suffix not in (".pyc", ".nbi", ".nbc"):
            h.update(rel.as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def code_digest() -> str:
    """`source_digest()`, and with plugins loaded (plugins.py) the digest of both: the
    code that makes a run, as run keys and reports name it."""
    from . import plugins
    extra = plugins.digest()
    if not extra:
        return source_digest()
    return hashlib.sha256(f"{source_digest()} {extra}".encode()).hexdigest()[:16]


def provenance() -> dict:
    """The version and the digest of the code that makes runs, as results and reports
    carry them."""
    return {"tierlab": __version__, "source": code_digest()}
