"""Whether file custody can run here, decided once at import without failing the import.

Custody needs kernel ``flock`` locks (``fcntl``), ``O_NOFOLLOW`` opens and
directory-relative system calls. Windows has none of them: there the plugin
imports, its worker and commands report :data:`UNAVAILABLE_MESSAGE`, and every
primitive raises :class:`~hostcore_file_custody.errors.CustodyUnavailable`.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from hostcore_file_custody.errors import CustodyUnavailable

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

UNAVAILABLE_MESSAGE = "file custody is unavailable on this platform"

AVAILABLE: bool = (
    fcntl is not None
    and hasattr(os, "O_NOFOLLOW")
    and os.open in os.supports_dir_fd
    and os.rename in os.supports_dir_fd
)


def require_custody() -> None:
    """Raise :class:`CustodyUnavailable` unless custody can run on this platform."""
    if not AVAILABLE:
        raise CustodyUnavailable(f"{UNAVAILABLE_MESSAGE} ({sys.platform}): it needs flock, "
                                 "O_NOFOLLOW and directory-relative system calls")
