"""hostcore-postgres: the export stream of many hosts in one PostgreSQL database.

The plugin (the entry point) is :mod:`hostcore_postgres.plugin`; the push,
its transaction and its connection are in :mod:`hostcore_postgres.destination`;
the tables, their versions and migrations in :mod:`hostcore_postgres.schema`;
failures and their kinds in :mod:`hostcore_postgres.errors`.
:mod:`hostcore_postgres.local_server` starts a throwaway server for tests and
benchmarks.
"""
