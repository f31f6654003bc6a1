"""Alembic's environment for halo.db's tables on PostgreSQL. It runs only on a connection
handed to it (`halo.storage.migrate`), inside that connection's transaction: there is no
alembic.ini and no URL here."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=context.config.attributes.get("target_metadata"),
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
