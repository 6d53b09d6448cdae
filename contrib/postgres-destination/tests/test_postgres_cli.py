"""`hostcore export -d postgres` and `hostcore status`, and bad input.

Every refusal is one line on stderr and exit status 1 (2 for bad configuration);
nothing is lost locally and the next run, once the cause is fixed, resumes. The
command runs in-process (``hostcore_cli``) where a process adds nothing, and as a
real process where it does: libpq's own environment, logging to a real stderr.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import hostcore_postgres.plugin as postgres_plugin
import msgspec
import pytest
from hostcore_postgres.schema import SCHEMA_VERSION

from hostcore.export.exporter import BACKOFF_PATH, Backoff
from hostcore.host import Host

SECRET = "s3cret-Pa55-do-not-leak"
# A 10 ms back-off: each case's next run follows its failure at once.
QUICK_RETRY = {"backoff_seconds": 0.01, "backoff_max_seconds": 0.01}


def export(pg, root: Path, *args: str, **env: str):
    return pg.hostcore(root, "export", "-d", "postgres", *args, **env)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert "Traceback" not in stderr
    return lines[0]


def store_rows(root: Path) -> int:
    host = Host(root=root, load_entrypoints=False, env={}, read_only=True)
    try:
        return host.store.head_position()
    finally:
        host.close()


def status(pg, root: Path) -> dict:
    result = pg.hostcore(root, "status", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["components"]["worker"]["export"]


def test_export_pushes_the_permitted_rows_and_status_reports_the_database(pg, tmp_path):
    root = tmp_path / "root"
    origin = pg.fill_root(root, pg.config(), rows=30, directories=("/work/a", "/work/secret"),
                          withheld=("/work/secret",))
    result = export(pg, root)
    assert result.returncode == 0, result.stderr
    assert "exported 30 row(s) to postgres" in result.stdout
    assert pg.held(origin) == list(range(1, 31))
    assert pg.query("SELECT count(*) FROM hostcore.rows WHERE directory = '/work/secret'") == [
        (0,)]
    shown = status(pg, root)
    assert (shown["destination"], shown["position"], shown["rows_behind"]) == ("postgres", 30, 0)
    assert set(shown["governance"].values()) == {"current"}
    assert shown["moved_at_destination"] == "none"

    pg.fill_root(root, rows=5)  # five more permitted rows
    assert status(pg, root)["rows_behind"] == 5
    again = export(pg, root, "--json")
    assert json.loads(again.stdout)["rows"] == 5
    assert pg.held(origin) == list(range(1, 31)) + list(range(61, 66))


def test_status_shows_governance_moved_at_the_database(pg, cli):
    origin = pg.fill_root(cli.root, pg.config(), rows=3)
    assert cli("export", "-d", "postgres").exit_code == 0
    pg.query("UPDATE hostcore.refs SET context = 'moved-by-someone' WHERE origin = %s",
             (origin,))
    shown = status_in_process(cli)
    assert shown["moved_at_destination"] == "context"
    assert shown["governance"]["context"].startswith("moved")


def test_an_unavailable_server_is_one_line_in_status_not_a_traceback(pg, cli, tmp_path):
    pg.fill_root(cli.root, pg.config(dsn=f"host={tmp_path / 'nowhere'} dbname=x"), rows=2)
    assert "cannot connect to the server" in status_in_process(cli)["error"]


def status_in_process(cli) -> dict:
    result = cli("status", "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["components"]["worker"]["export"]


# -- bad input: exit 1, one line, nothing lost, the next run resumes -------------------


def unreachable(pg, tmp_path):  # no server listens on that socket
    return {"dsn": f"host={tmp_path / 'no-server-here'} dbname=x user=postgres"}, None


def wrong_credentials(pg, tmp_path):
    dsn = pg.role("machine_wrong", SECRET, "GRANT ALL ON DATABASE {db} TO {{role}}".format(
        db=pg.dsn.split("dbname=")[1].split()[0]))
    return {"dsn_env": "PG_TEST_DSN"}, f"{dsn} password=not-{SECRET}"


def missing_database(pg, tmp_path):
    return {"dsn": pg.dsn.replace("dbname=", "dbname=nonexistent_")}, None


def newer_schema(pg, tmp_path):
    pg.query("UPDATE hostcore.schema_version SET version = 7, min_writer_version = 7")
    return {"dsn": pg.dsn}, None


def altered_table(pg, tmp_path):
    pg.query("ALTER TABLE hostcore.rows DROP COLUMN git_remote")
    return {"dsn": pg.dsn}, None


def altered_key(pg, tmp_path):
    pg.query("ALTER TABLE hostcore.rows DROP CONSTRAINT rows_pkey")
    return {"dsn": pg.dsn}, None


BAD_INPUT = {
    "unreachable": (unreachable, "cannot connect to the server"),
    "wrong_credentials": (wrong_credentials, "refused the login"),
    "missing_database": (missing_database, "no such database"),
    "newer_schema": (newer_schema, "schema is version 7 and admits writers of version 7 or "
                                   "newer"),
    "altered_table": (altered_table, "table hostcore.rows has no column git_remote"),
    "altered_key": (altered_key, "table hostcore.rows lacks its primary key"),
}


@pytest.fixture
def cli(hostcore_cli, register_plugin, tmp_path):
    """``hostcore`` in-process on ``tmp_path / "root"`` with this plugin."""
    register_plugin(postgres_plugin)
    root = tmp_path / "root"

    def run(*args: str, env: dict[str, str] | None = None):
        return hostcore_cli(*args, root=root, env=env)

    run.root = root
    return run


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line_exit_1_and_the_next_run_resumes(pg, tmp_path, cli, case):
    make, expected = BAD_INPUT[case]
    root = cli.root
    origin = pg.fill_root(root, pg.config(), rows=4)
    assert cli("export", "-d", "postgres").exit_code == 0  # the schema holds 1..4
    pg.fill_root(root, rows=6)
    config, env_dsn = make(pg, tmp_path)
    (root / "hostcore.toml").write_text(_toml(config))
    env = {"PG_TEST_DSN": env_dsn} if env_dsn else {}

    failed = cli("export", "-d", "postgres", env=env)
    assert failed.exit_code == 1, failed.stdout + failed.stderr
    line = one_line(failed.stderr)
    assert line.startswith("hostcore export: postgres destination: ")
    assert expected in line
    assert SECRET not in failed.stderr + failed.stdout
    assert store_rows(root) == 10, "nothing was lost locally"

    _fix(pg, case)
    (root / "hostcore.toml").write_text(_toml({"dsn": pg.dsn}))
    _wait_out_backoff(root)  # the failed run deferred the next by QUICK_RETRY's 10 ms
    resumed = cli("export", "-d", "postgres")
    assert resumed.exit_code == 0, resumed.stderr
    assert pg.held(origin) == list(range(1, 11))


def _fix(pg, case: str) -> None:
    if case == "newer_schema":
        pg.query("UPDATE hostcore.schema_version SET version = %s, min_writer_version = 1",
                 (SCHEMA_VERSION,))
    elif case == "altered_table":
        pg.query("ALTER TABLE hostcore.rows ADD COLUMN git_remote text NOT NULL DEFAULT ''")
    elif case == "altered_key":
        pg.query("ALTER TABLE hostcore.rows ADD PRIMARY KEY (stream, origin, position)")


def _wait_out_backoff(root: Path) -> None:
    """Until the back-off the last failed export recorded has run out: a run made
    sooner (an in-process command can follow within milliseconds) is deferred."""
    backoff = msgspec.json.decode((root / BACKOFF_PATH).read_bytes(), type=Backoff)
    retry_at = datetime.fromisoformat(backoff.retry_at.replace("Z", "+00:00"))
    left = (retry_at - datetime.now(UTC)).total_seconds()
    assert left < 5, backoff  # QUICK_RETRY's, not a default back-off
    time.sleep(max(0.0, left) + 0.01)


def _toml(table: dict[str, str]) -> str:
    body = "\n".join(f'{k} = "{v}"' for k, v in table.items())
    retry = "\n".join(f"{k} = {v}" for k, v in QUICK_RETRY.items())
    return f"[plugins.postgres-destination]\n{body}\n[plugins.export]\n{retry}\n"


def test_a_minimal_role_on_a_database_without_the_schema_is_told_who_must_create_it(
        pg, cli):
    dsn = pg.role("machine_early", SECRET)
    pg.fill_root(cli.root, {"plugins": {"postgres-destination": {"dsn_env": "PG_TEST_DSN"}}},
                 rows=2)
    failed = cli("export", "-d", "postgres", env={"PG_TEST_DSN": f"{dsn} password={SECRET}"})
    assert failed.exit_code == 1
    line = one_line(failed.stderr)
    assert "schema does not exist in this database and this role may not create" in line


# -- bad configuration: exit 2 ----------------------------------------------------------


BAD_CONFIG = {
    "both_dsn_and_dsn_env": ({"dsn": "dbname=x", "dsn_env": "X"}, "set dsn or dsn_env, not both"),
    "dsn_env_unset": ({"dsn_env": "HOSTCORE_TEST_UNSET_DSN"},
                      "the variable HOSTCORE_TEST_UNSET_DSN"),
    "unparseable_dsn": ({"dsn": f"host=/tmp password {SECRET}"},
                        "not a libpq connection string"),
    "unknown_option": ({"dsn": "hots=/tmp"}, 'invalid connection option "hots"'),
    "unknown_key": ({"dns": "dbname=x"}, "dns"),
    "bad_schema_name": ({"dsn": "dbname=x", "schema": "Robert'); DROP"}, "schema"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIG))
def test_bad_configuration_is_one_line_and_exit_2(pg, cli, case):
    config, expected = BAD_CONFIG[case]
    pg.fill_root(cli.root, rows=1)
    (cli.root / "hostcore.toml").write_text(_toml(config))
    failed = cli("export", "-d", "postgres")
    assert failed.exit_code == 2, failed.stdout + failed.stderr
    line = one_line(failed.stderr)
    assert expected in line
    assert SECRET not in failed.stderr


# -- libpq's environment, .pgpass, sslmode, and no password anywhere -------------------


def test_libpq_variables_and_pgpass_supply_what_the_dsn_leaves_out(pg, tmp_path):
    db = pg.dsn.split("dbname=")[1].split()[0]
    pg.role("machine_env", SECRET, f"GRANT ALL ON DATABASE {db} TO {{role}}")
    home = tmp_path / "home"
    home.mkdir()
    pgpass = home / ".pgpass"
    pgpass.write_text(f"*:*:{db}:machine_env:{SECRET}\n")
    pgpass.chmod(0o600)
    root = tmp_path / "root"
    origin = pg.fill_root(root, {"plugins": {"postgres-destination": {"dsn": ""}}}, rows=3)
    result = export(pg, root, HOME=str(home), PGHOST=str(pg.server.socket_dir),
                    PGDATABASE=db, PGUSER="machine_env")
    assert result.returncode == 0, result.stderr
    assert pg.held(origin) == [1, 2, 3]
    (who,) = pg.query("SELECT DISTINCT machine FROM hostcore.exported")
    assert who == ("machine_env",)


def test_sslmode_passes_through_to_libpq(pg, cli):
    """libpq itself judges the value (the test server listens on a socket only, where
    libpq uses no TLS, so an invalid mode is what shows it arrived unchanged)."""
    pg.fill_root(cli.root, pg.config(dsn=f"{pg.dsn} sslmode=sometimes"), rows=1)
    result = cli("export", "-d", "postgres")
    assert result.exit_code == 1
    assert 'invalid sslmode value: "sometimes"' in one_line(result.stderr)


def test_no_password_reaches_a_state_file_or_a_log(pg, tmp_path):
    db = pg.dsn.split("dbname=")[1].split()[0]
    dsn = pg.role("machine_secret", SECRET, f"GRANT ALL ON DATABASE {db} TO {{role}}")
    root = tmp_path / "root"
    pg.fill_root(root, {"plugins": {"postgres-destination": {"dsn_env": "PG_TEST_DSN"}}},
                 rows=3)
    outputs = []
    for password in (SECRET, f"wrong-{SECRET}"):  # a success and a refusal, at debug level
        result = pg.hostcore(root, "-vv", "export", "-d", "postgres",
                             PG_TEST_DSN=f"{dsn} password={password}")
        outputs.append(result.stdout + result.stderr)
        result = pg.hostcore(root, "-vv", "status", PG_TEST_DSN=f"{dsn} password={password}")
        outputs.append(result.stdout + result.stderr)
    assert "exported 3 row(s)" in outputs[0]
    for output in outputs:
        assert SECRET not in output
    for path in root.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_building_a_configured_host_does_not_import_psycopg(pg, tmp_path):
    root = tmp_path / "root"
    pg.fill_root(root, pg.config(), rows=1)
    code = ("import sys\nfrom hostcore import Host\n"
            "import hostcore_postgres.plugin as p\n"
            f"h = Host(root={str(root)!r}, plugins=[p], load_entrypoints=False, env={{}})\n"
            "assert [d.name for d in h.destinations] == ['postgres']\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('psycopg', 'asyncio', 'ssl')))\nh.close()\n")
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "HOSTCORE_ROOT": str(root)})
    assert out.stdout.strip() == "[]"
