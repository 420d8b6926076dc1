"""Name registries and the `name:key=value,...` spec syntax (DESIGN.md, CLI contract).

Machines, workloads, policies, allocation policies and monitors register by name, as
memtierd's trackers, policies and movers do: adding one means adding one module that
decorates its class with ``@REGISTRY.register("name")``.
"""
from __future__ import annotations

import inspect
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, TypeVar

from .errors import TierlabError, choices_error

T = TypeVar("T")


@dataclass(frozen=True)
class Spec:
    """A parsed `name:variant,key=value,...` string. Bare words are positional args."""

    name: str
    args: tuple
    params: dict

    @classmethod
    def parse(cls, text: str) -> "Spec":
        text = text.strip()
        if not text:
            raise TierlabError("empty name")
        # `name:variant,k=v` or `name,k=v` (no variant): the name ends at the first
        # ':' or ','
        cut = min((i for i in (text.find(":"), text.find(",")) if i >= 0), default=len(text))
        name, rest = text[:cut], text[cut + 1:]
        args, params = [], {}
        if rest:
            for part in rest.split(","):
                if "=" in part:
                    k, _, v = part.partition("=")
                    params[k.strip().replace("-", "_")] = v.strip()
                elif part:
                    args.append(part)
        return cls(name.strip(), tuple(args), params)

    def __str__(self) -> str:
        parts = list(self.args) + [f"{k}={v}" for k, v in self.params.items()]
        return self.name + (":" + ",".join(parts) if parts else "")


class Registry(Generic[T]):
    """A registry of named factories (classes) of one kind."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Callable[..., T]] = {}

    def register(self, name: str):
        def deco(obj):
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            obj.registered_name = name
            return obj

        return deco

    def names(self):
        return sorted(self._items)

    def get(self, name: str):
        if name not in self._items:
            raise choices_error(self.kind, name, self._items)
        return self._items[name]

    def items(self):
        return sorted(self._items.items())

    def describe(self, name: str) -> str:
        doc = inspect.getdoc(self._items[name]) or ""
        return " ".join(doc.split("\n\n")[0].split())

    def create(self, spec: "Spec | str", **extra):
        """Instantiate `spec` (a Spec or text), passing its params as keyword arguments.

        Unknown parameters give a TierlabError naming the valid ones.
        """
        if isinstance(spec, str):
            spec = Spec.parse(spec)
        factory = self.get(spec.name)
        params = dict(spec.params)
        sig = inspect.signature(factory)
        accepts_var = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        valid = [n for n, p in sig.parameters.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in extra
                 and not n.startswith("_")]
        if not accepts_var:
            for k in params:
                if k not in valid:
                    raise TierlabError(
                        f"unknown parameter {k!r} for {self.kind} {spec.name!r}; "
                        f"valid: {', '.join(valid) or '(none)'}")
        if spec.args:
            if "variant" in sig.parameters:
                params["variant"] = spec.args[0]
            elif "path" in sig.parameters:
                params["path"] = ",".join(spec.args)
            else:
                raise TierlabError(
                    f"{self.kind} {spec.name!r} takes no variant (got {spec.args[0]!r})")
        try:
            return factory(**params, **extra)
        except TypeError as e:  # a missing required parameter
            raise TierlabError(f"{self.kind} {spec.name!r}: {e}") from None


def load_toml(path: str, what: str) -> dict:
    """Read a user's TOML file; a missing or malformed file is a one-line error."""
    p = Path(path)
    if not p.exists():
        raise TierlabError(f"{what} file {path!r} not found")
    if p.is_dir():
        raise TierlabError(f"{what} file {path!r} is a directory")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise TierlabError(f"{what} file {path}: not TOML (binary data, not UTF-8 text)") \
            from None
    except OSError as e:
        raise TierlabError(f"{what} file {path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise TierlabError(f"{what} file {path}: malformed TOML: {e}") from None
