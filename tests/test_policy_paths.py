"""Path rules shared by the class-per-entry list and purge (``hostcore.evidence.paths``)."""

from __future__ import annotations

import pytest

from hostcore.evidence.paths import ancestors, normalize_dir, within


@pytest.mark.parametrize(("raw", "normal"), [
    ("/w/repo/", "/w/repo"),
    ("/w//repo", "/w/repo"),
    ("/", "/"),
    (r"C:\Users\Me\Repo", "c:/users/me/repo"),
    ("C:/", "c:"),
    (r"\\Server\Share\x", "//server/share/x"),
    ("relative/dir", "relative/dir"),
    ("", ""),
])
def test_normalize_dir(raw, normal):
    assert normalize_dir(raw) == normal


def test_ancestors_run_from_the_directory_up_to_its_root():
    assert ancestors("/a/b") == ["/a/b", "/a", "/"]
    assert ancestors("c:/a") == ["c:/a", "c:"]
    assert ancestors("") == []


def test_within_is_on_path_boundaries():
    assert within("/w/repo/x", "/w/repo")
    assert within("/w/repo", "/w/repo/")
    assert not within("/w/repository", "/w/repo")
    assert within("/anything", "/")
    assert within(r"D:\work\x", "d:/WORK")
    assert not within("/w", "/w/repo")
