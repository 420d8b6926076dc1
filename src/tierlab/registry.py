"""Name registries and the `name:key=value,...` spec syntax (docs/cli.md, "The spec
grammar").

Machines, workloads, policies, allocation policies and monitors register by name, as
memtierd's trackers, policies and movers do: adding one means adding one module that
decorates its class with ``@REGISTRY.register("name")``.
"""
from __future__ import annotations

import inspect
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, TypeVar

from .errors import TierlabError, choices_error

T = TypeVar("T")


_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Spec:
    """A parsed `name:variant,key=value,...` string (docs/cli.md, "The spec grammar").

    A part `key=value` whose key is a word (letters, digits, '_' or '-', '-' read as
    '_') is a parameter; any other part is a bare word: the variant, or a file's path.
    A key given twice is an error. `raw` keeps the text after the name, for a path
    that holds ',' or '='.
    """

    name: str
    args: tuple
    params: dict
    raw: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str) -> "Spec":
        text = text.strip()
        if not text:
            raise TierlabError("empty name")
        # `name:variant,k=v` or `name,k=v` (no variant): the name ends at the first
        # ':' or ','
        cut = min((i for i in (text.find(":"), text.find(",")) if i >= 0), default=len(text))
        name, rest = text[:cut].strip(), text[cut + 1:]
        args, params = [], {}
        for part in rest.split(",") if rest else ():
            k, eq, v = part.partition("=")
            if eq and _KEY.match(k.strip()):
                key = k.strip().replace("-", "_")
                if key in params:
                    raise TierlabError(f"bad spec {text!r}: parameter {key!r} given twice "
                                       f"({key}={params[key]} and {part.strip()})")
                params[key] = v.strip()
            elif eq and not k.strip():
                raise TierlabError(f"bad spec {text!r}: {part.strip()!r} has no key "
                                   "before '='")
            elif part.strip():
                args.append(part.strip())
        return cls(name, tuple(args), params, rest)

    def __str__(self) -> str:
        parts = list(self.args) + [f"{k}={v}" for k, v in self.params.items()]
        return self.name + (":" + ",".join(parts) if parts else "")


def user_params(factory) -> list[str]:
    """The keys a user may give `factory` in a spec: its keyword parameters and, when it
    passes **kwargs on, its base classes' (not `variant`/`path`, nor the ones it lists
    in `internal_params`, which tierlab sets itself)."""
    keys: list[str] = []
    internal = set(getattr(factory, "internal_params", ())) | {"variant", "path"}
    chain = factory.__mro__ if inspect.isclass(factory) else (factory,)
    for obj in chain:
        fn = obj.__init__ if inspect.isclass(obj) else obj
        if inspect.isclass(obj) and "__init__" not in vars(obj):
            continue
        sig = inspect.signature(fn)
        keys += [n for n, p in sig.parameters.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"
                 and not n.startswith("_") and n not in internal and n not in keys]
        if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
            break
    return keys


def _plugins() -> None:
    """Plugins register before any look-up (plugins.py)."""
    from . import plugins
    plugins.load()


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
        _plugins()
        return sorted(self._items)

    def get(self, name: str):
        _plugins()
        if name not in self._items:
            raise choices_error(self.kind, name, self._items)
        return self._items[name]

    def items(self):
        _plugins()
        return sorted(self._items.items())

    def describe(self, name: str) -> str:
        _plugins()
        doc = inspect.getdoc(self._items[name]) or ""
        return " ".join(doc.split("\n\n")[0].split())

    def create(self, spec: "Spec | str", **extra):
        """Instantiate `spec` (a Spec or text), passing its params as keyword arguments.

        The rules of docs/cli.md's spec grammar: an unknown key, more than one variant,
        a variant for a name that takes none, or a parameter that does not apply to the
        chosen variant (the factory's `variant_params`) is a TierlabError naming the
        valid choices.
        """
        if isinstance(spec, str):
            spec = Spec.parse(spec)
        factory = self.get(spec.name)
        sig = inspect.signature(factory)
        takes = set(sig.parameters)
        valid = [k for k in user_params(factory) if k not in extra]
        params, args = dict(spec.params), list(spec.args)
        if "path" in takes and spec.raw:
            args, params = _path_and_params(spec, valid)
        for k in params:
            if k not in valid:
                raise TierlabError(
                    f"unknown parameter {k!r} for {self.kind} {spec.name!r}; "
                    f"valid: {', '.join(valid) or '(none)'}")
        if args:
            if "variant" in takes:
                if len(args) > 1:
                    raise TierlabError(
                        f"bad {self.kind} {str(spec)!r}: one variant only, got "
                        f"{', '.join(map(repr, args))}; parameters are key=value "
                        f"({', '.join(valid)})")
                params["variant"] = args[0]
            elif "path" in takes:
                params["path"] = args[0]
            else:
                raise TierlabError(
                    f"{self.kind} {spec.name!r} takes no variant (got {args[0]!r}); "
                    f"parameters are key=value: {', '.join(valid) or '(none)'}")
        _check_variant_params(factory, self.kind, spec.name, params, sig)
        try:
            return factory(**params, **extra)
        except TypeError as e:  # a missing required parameter
            raise TierlabError(f"{self.kind} {spec.name!r}: {e}") from None


def _path_and_params(spec: Spec, valid) -> tuple[list, dict]:
    """A path-taking spec (masim:PATH, trace:PATH): the path is the first part and every
    part up to the first `key=value` with a valid key, so a path may hold ',' or '='."""
    parts = spec.raw.split(",") if spec.raw else []
    n = 1
    while n < len(parts):
        k, eq, _ = parts[n].partition("=")
        if eq and k.strip().replace("-", "_") in valid:
            break
        n += 1
    path = ",".join(parts[:n]).strip()
    rest = Spec.parse(f"{spec.name}:" + ",".join(parts[n:])) if n < len(parts) else None
    return ([path] if path else []), (dict(rest.params) if rest else {})


def _check_variant_params(factory, kind, name, params, sig) -> None:
    """Refuse a parameter the chosen variant ignores (factory.variant_params: key ->
    the variants it applies to)."""
    only = getattr(factory, "variant_params", {})
    if not only:
        return
    default = sig.parameters["variant"].default
    variant = str(params.get("variant", default)).strip().lower()
    for k in params:
        if k in only and variant not in only[k]:
            raise TierlabError(f"parameter {k!r} does not apply to {kind} "
                               f"{name}:{variant}; it applies to {name}:"
                               f"{', '.join(only[k])}")


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
