"""PostgreSQL access: the embedded server, the connection pool, the schema and the SQL."""
