-- kcm_ddl 1.0: DDL issued on a compute node is carried out on the shards, in the same
-- statement. Why event triggers + PL/Python: the statement is parsed, checked and
-- permission-checked by PostgreSQL itself, our code runs inside the user's transaction
-- (a PostgreSQL-side failure rolls the local catalog back by itself), and the shard side
-- is one pymysql connection per shard with the credentials the catalog sync already keeps
-- in this database's user mappings. The C part (kcm_ddl.c) only lets DROP TABLE name a
-- foreign table.
--
-- CREATE TABLE: ddl_command_end sees the new (local, empty) table, maps its columns to
-- MariaDB types, refuses what has no faithful MariaDB form, checks every shard for the
-- name, creates the table on the chosen shard in database <D>_$$_<S>, then replaces the
-- local table with a foreign table imported from there. A failure after the shard CREATE
-- drops it again (and the database, when this statement created it).
-- DROP TABLE (and DROP SCHEMA ... CASCADE): sql_drop removes each dropped foreign table
-- from the shard that holds it; every shard must answer first, so a drop is all or nothing.
-- ALTER TABLE ADD/DROP/RENAME COLUMN on such a table: ddl_command_end compares the foreign
-- table's columns with the shard's and applies the difference there.
-- The agent's own catalog sync sets kcm.sync = on: its imports and drops are not user DDL.

CREATE FUNCTION kcm_ddl.carry_out(event text) RETURNS text[]
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog AS $py$
