"""Remote URLs reduce to lower-case owner/repo keys; anything else is not a repository."""

from __future__ import annotations

import pytest
from hostcore_github_capture.remotes import (
    KeyReducer,
    parse_remote,
    parse_repo_argument,
    repo_key,
)
from hypothesis import given, settings
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
    "https://github.com/octo/tool?tab=readme",
    "https://github.com/octo/tool#main",
    "https://github.com/octo/tool.git?ref=main#readme",
    "https://github.com:8443/octo/tool//",
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


# What a remote can carry around its owner/repo: every part the URL grammar allows,
# valid and not, so the fast path meets queries, fragments, ports (in range, out of
# range, empty, not digits), user info (plain, escaped, with "@", "?" or brackets)
# and runs of trailing slashes.
schemes = st.sampled_from(["https://", "http://", "ssh://", "git://", "git+ssh://", "ssh+git://",
                           "ftp://", "file://", "HTTPS://", ""])
userinfo = st.sampled_from(["", "git@", "user:pw@", "u%40x@", "a@b@", "us?er@", "us#er@",
                            "[::1]@", ":@", "@", "t\u00e9@"])
hosts = st.sampled_from(["github.com", "GitHub.com", "www.github.com", "ssh.github.com",
                         "gitlab.com", "github.com.evil", "github.com.", "[::1]", ""])
ports = st.sampled_from(["", ":", ":22", ":443", ":0", ":65535", ":65536", ":99999",
                         ":1234567", ":-1", ":x", ":\u0663", ":00022"])
separators = st.sampled_from(["/", ":", ":/", "//", "::"])
segment = st.one_of(owners, repos, st.from_regex(r"[A-Za-z0-9._@:?#%\t -]{0,12}", fullmatch=True))
paths = st.lists(segment, min_size=0, max_size=4).map("/".join)
endings = st.builds("{}{}{}{}".format,
                    st.sampled_from(["", ".git", ".GIT"]),
                    st.sampled_from(["", "/", "//", "///"]),
                    st.sampled_from(["", "?", "?tab=readme", "?a=b&c=/d", "?x=@:"]),
                    st.sampled_from(["", "#", "#main", "#L10-L20", "#a/b"]))
remote_like = st.builds("{}{}{}{}{}{}{}".format, schemes, userinfo, hosts, ports, separators,
                        paths, endings)
# Mostly GitHub URLs with a plausible owner/repo, so the odd parts meet a path the
# fast path would otherwise accept.
near_github = st.builds("{}{}{}{}/{}/{}{}".format,
                        st.sampled_from(["https://", "ssh://", "git://", "http://"]), userinfo,
                        st.sampled_from(["github.com", "www.github.com", "ssh.github.com"]),
                        ports, owners, repos, endings)


@settings(max_examples=400)
@given(st.one_of(near_github, remote_like, st.text(max_size=40)))
def test_the_fast_path_agrees_with_the_full_parser(text):
    expected = parse_remote(text.strip()) if text.strip() else None
    assert repo_key(text) == expected


@given(owners, repos, st.sampled_from(["", "/", "//", ".git", ".git/"]),
       st.sampled_from(["", "?tab=readme", "?a=1&b=2"]), st.sampled_from(["", "#main", "#"]),
       st.sampled_from(["", "user@", "user:token@"]), st.sampled_from(["", ":443", ":8443"]))
def test_a_web_url_names_its_repository_whatever_follows_the_path(
        owner, repo, slashes, query, fragment, user, port):
    text = f"https://{user}github.com{port}/{owner}/{repo}{slashes}{query}{fragment}"
    assert repo_key(text) == parse_remote(text) == f"{owner}/{repo}".lower()
