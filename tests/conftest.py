"""Shared fixtures: a throwaway PostgreSQL database for the whole test session.

``postgres`` creates ``plait_test_<pid>_<random>`` on the server named by
``PLAIT_TEST_POSTGRES`` (default: the local server, user ``postgres``, its maintenance
database) and drops it when the session ends. ``postgres_url`` gives each test its own
empty schema in that database (selected by ``search_path`` in the URL's libpq
``options``): as isolated as a database per test for the store, and much faster.

When no server answers, PostgreSQL tests are skipped with the reason; with
``PLAIT_REQUIRE_POSTGRES=1`` (CI) they fail instead, so a missing server can never pass
for a green run. Nothing here imports psycopg until a PostgreSQL test asks for it.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import pytest

ADMIN_URL = os.environ.get("PLAIT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
"""A role that may create and drop databases, on the server the tests use."""


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("PLAIT_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{reason} (PLAIT_REQUIRE_POSTGRES=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


class PostgresServer:
    """The test server: the session's database, fresh schemas and fresh databases in it."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.database = f"plait_test_{os.getpid()}_{secrets.token_hex(4)}"
        self.url = self.with_database(admin_url, self.database)
        self._schemas = itertools.count(1)

    @staticmethod
    def with_database(url: str, dbname: str) -> str:
        """``url`` naming database ``dbname`` instead."""
        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc, "/" + quote(dbname), parts.query, ""))

    @staticmethod
    def with_options(url: str, *settings: str) -> str:
        """``url`` with server settings (``"search_path=x"``) added to libpq ``options``."""
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        flags = [query.get("options", ""), *(f"-c {setting}" for setting in settings)]
        query["options"] = " ".join(flags).strip()
        return urlunsplit(
            (parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), "")
        )

    def admin(self) -> Any:
        """An autocommit connection to the maintenance database; skip/fail if unreachable."""
        parts = urlsplit(self.admin_url)
        where = f"{parts.hostname}:{parts.port or 5432}"
        try:
            import psycopg
        except ImportError as exc:
            _unavailable(f"PostgreSQL not reachable at {where}: psycopg is not installed ({exc})")
        try:
            return psycopg.connect(self.admin_url, autocommit=True, connect_timeout=3)
        except psycopg.Error as exc:
            _unavailable(f"PostgreSQL not reachable at {where}: {' '.join(str(exc).split())}")

    def create_database(self, name: str) -> str:
        from psycopg import sql

        with self.admin() as admin:
            admin.execute(
                sql.SQL(
                    "CREATE DATABASE {} ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
                    " TEMPLATE template0"
                ).format(sql.Identifier(name))
            )
        return self.with_database(self.admin_url, name)

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self.admin() as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    @contextmanager
    def new_database(self) -> Iterator[str]:
        """A whole new, empty database (slower than a schema: only where it matters)."""
        name = f"{self.database}_{secrets.token_hex(3)}"
        url = self.create_database(name)
        try:
            yield url
        finally:
            self.drop_database(name)

    def new_schema(self) -> str:
        """The URL of a new, empty schema of the session database (``search_path``)."""
        import psycopg
        from psycopg import sql

        schema = f"t{next(self._schemas)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        return self.with_options(self.url, f"search_path={schema}")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The test server with this session's database created (and dropped at the end)."""
    server = PostgresServer(ADMIN_URL)
    server.create_database(server.database)
    try:
        yield server
    finally:
        server.drop_database(server.database)


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A URL whose ``search_path`` is a new, empty schema of the session database."""
    return postgres.new_schema()
