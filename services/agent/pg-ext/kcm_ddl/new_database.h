/* new_database.c: a database made through a compute node gets its shard servers inside CREATE DATABASE. */
#ifndef KCM_NEW_DATABASE_H
#define KCM_NEW_DATABASE_H

/*
 * Called by CREATE DATABASE `dbname` once PostgreSQL and the shards made it: commits the
 * statement's transaction (the database is then there for other sessions) and gives the new
 * database this database's shard servers and user mappings. A failure is a WARNING: the
 * database exists, and the catalog sync gives it the servers on its next round.
 */
extern void give_new_database_shard_servers(const char *dbname);

#endif
