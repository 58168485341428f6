"""Where PostgreSQL has pgvector (migration 0013 created the extension), a function reading a
memory's stored vector (``embedding``: float32, little-endian, as ``vector_to_bytes`` writes
it) as a pgvector ``vector``, for the HNSW indexes over memories' vectors
(``memory_vector_index_ensure``) and the search of the nearest ones.

An expression index over the stored bytes, rather than a second column beside them: every
write of a memory's vector (consolidation, review, the embedding task) keeps the index right
with nothing to remember. IMMUTABLE, as an index expression must be: the same bytes always
give the same vector. The type is named with its schema: PostgreSQL 17 and later build and
maintain an index with a search path of their own, where the extension's types are not.
Elsewhere (SQLite, a PostgreSQL without pgvector) nothing.
"""

from django.db import migrations

PG_FORWARD = (
    "CREATE OR REPLACE FUNCTION memory_app_vector(data bytea) RETURNS {schema}.vector "
    "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ "
    "SELECT array_agg(CASE WHEN bits.exponent = 0 THEN bits.mantissa * 2::float8 ^ -149 "
    "ELSE (1 + bits.mantissa / 8388608.0::float8) * 2::float8 ^ (bits.exponent - 127) END "
    "* (1 - 2 * bits.sign) ORDER BY bits.i)::real[]::{schema}.vector "
    "FROM (SELECT i, get_byte(data, 4 * i + 3) >> 7 AS sign, "
    "((get_byte(data, 4 * i + 3) & 127) << 1) | (get_byte(data, 4 * i + 2) >> 7) AS exponent, "
    "((get_byte(data, 4 * i + 2) & 127) << 16) | (get_byte(data, 4 * i + 1) << 8) "
    "| get_byte(data, 4 * i) AS mantissa "
    "FROM generate_series(0, length(data) / 4 - 1) AS i) AS bits $$"
)
PG_BACKWARD = "DROP FUNCTION IF EXISTS memory_app_vector(bytea)"


def _with_pgvector(statement):
    def run(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT namespace.nspname FROM pg_extension AS extension JOIN pg_namespace AS"
                " namespace ON namespace.oid = extension.extnamespace WHERE extname = 'vector'"
            )
            found = cursor.fetchone()
        if found is not None:
            schema_editor.execute(statement.format(schema=connection.ops.quote_name(found[0])))

    return run


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0017_memory_search_index")]

    operations = [migrations.RunPython(_with_pgvector(PG_FORWARD), _with_pgvector(PG_BACKWARD))]
