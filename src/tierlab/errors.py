"""User-facing errors: one clear line, exit status 2 (docs/cli.md, "Errors")."""


class TierlabError(ValueError):
    """A bad name, value or file given by the user. The CLI prints it and exits 2; API
    callers can catch it as a ValueError."""


def choices_error(kind: str, value: str, valid) -> TierlabError:
    """An error naming the bad value and the valid choices."""
    return TierlabError(f"unknown {kind} {value!r}; valid: {', '.join(sorted(valid))}")


def write_error(path, err: OSError) -> TierlabError:
    """An error naming a file that could not be written and the OS's reason."""
    return TierlabError(f"cannot write {path}: {err.strerror or err}")
