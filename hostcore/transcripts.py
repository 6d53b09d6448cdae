"""Deprecated alias of :mod:`hostcore.evidence.transcripts` (0.1's ``jsonl_files`` is
:func:`~hostcore.evidence.transcripts.list_files`, which takes several patterns)."""

from hostcore._moved import alias


def _jsonl_files() -> object:
    # Built only if a 0.1 caller asks for jsonl_files; the alias itself needs none of this.
    from pathlib import Path

    from hostcore.evidence.transcripts import ReadCounts, list_files

    def jsonl_files(folder: Path, pattern: str) -> list[tuple[str, Path]]:
        return [(name, Path(path)) for name, path in list_files(folder, (pattern,),
                                                                 ReadCounts())]

    return jsonl_files


alias(__name__, "hostcore.evidence.transcripts", {"jsonl_files": _jsonl_files})
