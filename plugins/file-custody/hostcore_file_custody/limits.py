"""Size caps of the records custody reads and decodes.

Every record on disk is untrusted input: a manifest, a heartbeat or an audit
file can be truncated, hostile or simply runaway. Each is refused unread when
its ``fstat`` size is over its cap (:class:`~.errors.OversizedRecordError`), so
reading one costs at most its cap in memory, and what it would have justified is
kept. The caps are far above what custody writes: a manifest is under 1 KiB, a
heartbeat a few hundred bytes plus the session's projection.
"""

from __future__ import annotations

# An intent manifest (one source name, one revision, one owner record).
MAX_MANIFEST_BYTES = 64 * 1024
# A heartbeat, pid-map entry, prompt hash, generation record or last-sweep record.
MAX_RECORD_BYTES = 1024 * 1024
# One audit file: a sweep seals at most one record per candidate (1,000) into it.
MAX_AUDIT_FILE_BYTES = 16 * 1024 * 1024
