"""Remote URLs reduce to lower-case owner/repo keys; anything else is not a repository."""

from __future__ import annotations

import pytest
from hostcore_github_capture.remotes import (
    KeyReducer,
    parse_remote,
    parse_repo_argument,
    repo_key,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize("remote", [
    "https://github.com/Octo/Tool",
    "https://github.com/octo/tool.git",
    "https://github.com/octo/tool/",
    "https://github.com/octo/tool.git/",
    "http://github.com/octo/tool",
    "https://user:token@github.com/octo/tool.git",
    "https://www.github.com/octo/tool",
    "https://GitHub.com:443/octo/TOOL.git",
    "git://github.com/octo/tool.git",
    "ssh://git@github.com/octo/tool.git",
    "ssh://git@github.com:22/octo/tool",
    "ssh://git@ssh.github.com:443/octo/tool.git",
    "git+ssh://git@github.com/octo/tool.git",
    "git@github.com:octo/tool.git",
    "git@github.com:Octo/Tool",
    "git@GITHUB.COM:/octo/tool.git",
    "github.com:octo/tool",
    "  git@github.com:octo/tool.git\n",
])
def test_every_github_remote_form_gives_the_same_key(remote):
    assert repo_key(remote) == "octo/tool"


@pytest.mark.parametrize("remote", [
    "",
    "   ",
    "https://gitlab.com/octo/tool.git",
    "git@bitbucket.org:octo/tool.git",
    "https://github.com.evil.example/octo/tool",
    "https://notgithub.com/octo/tool",
    "/home/me/src/tool",
    "C:/Users/me/tool",
    "../tool",
    "file:///srv/git/tool.git",
    "https://github.com/octo",
    "https://github.com/octo/tool/tree/main",
    "https://github.com/",
    "git@github.com:octo/tool/extra.git",
    "https://github.com/-octo/tool",
    "https://github.com/octo/to ol",
    "https://github.com/octo/..",
    "https://github.com:notaport/octo/tool",
    "ftp://github.com/octo/tool",
])
def test_non_github_or_malformed_remotes_are_not_repositories(remote):
    assert repo_key(remote) is None


def test_reducer_counts_unrecognised_remotes_but_not_empty_ones():
    reducer = KeyReducer()
    keys = [reducer.key(r) for r in ["git@github.com:a/b.git", "", "https://gitlab.com/a/b",
                                      "https://gitlab.com/a/b", "https://github.com/A/B"]]
    assert keys == ["a/b", None, None, None, "a/b"]
    assert reducer.unrecognised == 2


def test_reducer_cache_stays_within_its_bound():
    reducer = KeyReducer(cache_size=8)
    for i in range(100):
        assert reducer.key(f"https://github.com/o/r{i}") == f"o/r{i}"
        assert len(reducer.cache) <= 8


def test_user_argument_accepts_owner_repo_or_a_remote():
    assert parse_repo_argument("Octo/Tool") == "octo/tool"
    assert parse_repo_argument("git@github.com:octo/tool.git") == "octo/tool"
    assert parse_repo_argument("tool") is None
    assert parse_repo_argument("https://gitlab.com/octo/tool") is None


owners = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,20}", fullmatch=True)
repos = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,30}", fullmatch=True).filter(
    lambda r: r not in {".", ".."} and not r.lower().endswith(".git"))


@given(owners, repos, st.sampled_from([
    "https://github.com/{}/{}.git", "git@github.com:{}/{}.git", "ssh://git@github.com/{}/{}",
    "https://github.com/{}/{}"]))
def test_keys_are_case_insensitive_and_form_independent(owner, repo, form):
    expected = f"{owner}/{repo}".lower()
    assert repo_key(form.format(owner, repo)) == expected
    assert repo_key(form.format(owner.upper(), repo.swapcase())) == expected


remote_like = st.builds(
    "{}{}{}{}{}".format,
    st.sampled_from(["https://", "http://", "ssh://", "git://", "git+ssh://", "ftp://", "", "git@",
                     "user:pw@", "HTTPS://"]),
    st.sampled_from(["github.com", "GitHub.com", "www.github.com", "ssh.github.com",
                     "gitlab.com", "github.com.evil", ""]),
    st.sampled_from([":", "/", ":22/", ":/", "::", "//"]),
    st.from_regex(r"[A-Za-z0-9._@:-]{0,12}(/[A-Za-z0-9._@:-]{0,12}){0,3}", fullmatch=True),
    st.sampled_from(["", ".git", "/", ".git/", " "]),
)


@given(st.one_of(remote_like, st.text(max_size=40)))
def test_the_fast_path_agrees_with_the_full_parser(text):
    expected = parse_remote(text.strip()) if text.strip() else None
    assert repo_key(text) == expected
