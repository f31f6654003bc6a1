"""Alembic's environment for halo.db's tables on PostgreSQL. It runs on a connection handed
to it (`halo.storage.migrate`), inside that connection's transaction: there is no alembic.ini
and no URL here. Offline (`head_tables`), it only writes the DDL out as text."""

from alembic import context

if context.is_offline_mode():
    context.configure(dialect_name="postgresql", literal_binds=True)
else:
    context.configure(
        connection=context.config.attributes["connection"],
        target_metadata=context.config.attributes.get("target_metadata"),
        compare_type=True,
    )
with context.begin_transaction():
    context.run_migrations()
