"""The PostgreSQL the shared-store tests use: a throw-away server the suite starts itself, one database per test.

The server runs on a Unix socket in a fresh folder, from Debian's ``postgresql`` binaries (which ``.ci/run``
installs when they are missing); as root it runs as the package's ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _server_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Path]:
    """A PostgreSQL server on a Unix socket in a fresh folder; yields that folder (the socket's directory)."""
    binaries = _server_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL's server binaries are not installed (.ci/run installs Debian's postgresql)")
    root = Path(tempfile.mkdtemp(prefix="ltx-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the Debian package's postgres user runs it
        import pwd

        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    subprocess.run([*as_user, str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "ltx"], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
                    "-o", f"-k {root} -c listen_addresses='' -F", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        yield root
    finally:
        subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: Path) -> str:
    """A fresh database on the server, as the SQLAlchemy URL a team would pass to --store."""
    import psycopg

    name = f"ltx_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(host=str(server), user="ltx", dbname="postgres", autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return f"postgresql+psycopg://ltx@/{name}?host={server}"


@pytest.fixture
def store_url(postgres_server: Path) -> str:
    return new_database(postgres_server)
