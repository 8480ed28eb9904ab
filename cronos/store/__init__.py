"""PostgreSQL access: the pool, migrations, SQL constants (`queries`) and store classes."""
