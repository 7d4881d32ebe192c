// Options every short-lived mysql2 connection kcm opens should carry.

/**
 * mysql2 gives each connection an LRU cache for prepared statements sized by
 * `maxPreparedStatements`, 16,000 entries unless told otherwise, and allocates it when the
 * connection is made: ~4 ms of CPU and garbage per connection, against ~0.4 ms with a cache
 * of one (1,000 connections: 3.9-4.1 s of CPU vs 0.42-0.45 s). kcm never prepares
 * statements (it uses `query`, not `execute`), and the agent opens a connection per probe
 * and the manager's failure detector one per SQL ping: the default cache was most of
 * their cost.
 */
export const ONE_SHOT_MYSQL_OPTIONS = { maxPreparedStatements: 1 } as const;
