"""How the store's lines (`tamesu store migrate`, `view`, doctor, a run's warning) name a database URL: the user
kept (which role the store is opened as; the driver's own errors name it too), a password never, wherever it
was written (the userinfo, the query libpq also reads it from, a raw `@`, `:` or `#` in it), and a SQLite path
as written, `@` and `:` in it included. `net.urls.shown_url` is the other need: an agent's URL, whose userinfo
may be a token alone, is named with none of it."""

from __future__ import annotations

import pytest

from tamesu.store import password_hidden


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql+psycopg://tamesu:s3cret@127.0.0.1:5432/x", "postgresql+psycopg://tamesu:***@127.0.0.1:5432/x"),
    ("postgresql+psycopg://tamesu@db.internal/x", "postgresql+psycopg://tamesu@db.internal/x"),
    ("postgresql+psycopg://:s3cret@127.0.0.1/x", "postgresql+psycopg://:***@127.0.0.1/x"),
    ("postgresql://ci:s3:cr@t#x@127.0.0.1/x", "postgresql://ci:***@127.0.0.1/x"),  # unescaped, as users write it
    ("postgresql://ci@127.0.0.1/x?password=s3cret&sslmode=require", "postgresql://ci@127.0.0.1/x?..."),
    ("postgresql://ci:s3cret@[::1/x", "postgresql://ci:***@[::1/x"),  # no URL to urlsplit: hidden all the same
    ("sqlite:////srv/run:2@ci/.tamesu/store.db", "sqlite:////srv/run:2@ci/.tamesu/store.db"),
    ("sqlite:///store.db?mode=ro", "sqlite:///store.db?..."),
    ("not a url at all", "not a url at all"),
])
def test_a_store_url_is_named_with_its_user_and_without_its_password(url: str, shown: str) -> None:
    assert password_hidden(url) == shown
    assert "s3" not in password_hidden(url)
