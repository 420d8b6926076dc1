"""The terminal: `out` for tables and results, `err` for errors and progress (rich)."""
from __future__ import annotations

import sys

from rich.console import Console

err = Console(stderr=True)
# piped or logged output gets wide tables instead of 80-column wrapping
out = Console(width=None if sys.stdout is not None and sys.stdout.isatty() else 170)
