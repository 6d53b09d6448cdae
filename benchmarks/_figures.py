"""What the benchmark scripts share (a module, not a script: its name starts with _): a
run's figures as they print them.

Imported by its siblings as ``from _figures import spread`` (a script's own folder is
first on ``sys.path``), as ``decisions_identity.py`` takes ``poll_cycle``'s reader.
"""

from __future__ import annotations

import statistics


def spread(samples: list[float], form: str = ".3f", unit: str = "") -> str:
    """Median, min and max of ``samples``, each formatted with ``form`` and ``unit``:
    these machines are noisy, so one figure alone says too little."""
    return (f"median {statistics.median(samples):{form}}{unit} (min {min(samples):{form}}"
            f"{unit}, max {max(samples):{form}}{unit})")
