/*
 * exact_values: values of the types kcm maps (README "Type map") cross mysql_fdw 2.8 exactly.
 *
 * mysql_fdw binds every value it sends to a shard (the columns of an INSERT or UPDATE, the
 * row identity of an UPDATE or DELETE, a parameter of a pushed-down WHERE) with its
 * exported mysql_bind_sql_var, and reads every column with mysql_bind_result and
 * mysql_convert_to_pg. Measured through a compute node (test/cluster/sql-types.test.ts):
 *
 * - timestamp: bound as a MYSQL_TIME without its microseconds (second_part), and as a
 *   MariaDB TIMESTAMP, whose range is 1970-2038: '10:00:00.123456' landed as .000000 in
 *   DATETIME(6), and years 1000 or 9999 as NULL (issue 35, defect 5);
 * - time: bound as the timestamp 2000-01-01 plus the time, again without microseconds;
 * - numeric: bound as a double, so 17 significant digits at most
 *   (123456789012345678.99 landed as 123456789012345680.00), and two keys that differ
 *   beyond the 17th digit were one row for UPDATE and DELETE;
 * - real: read back through the client library's text form of a FLOAT, 6 significant
 *   digits (1.2345678 read as 1.23457).
 *
 * mysql_fdw.so calls these three functions through its PLT, and kcm_ddl.so is loaded (by
 * shared_preload_libraries, RTLD_GLOBAL) before mysql_fdw.so is, so the definitions below
 * are the ones its calls bind to. They handle those types themselves and hand every other
 * type to mysql_fdw's own, found in mysql_fdw.so by name.
 */
#include "postgres.h"

#include <mysql.h>

#include "catalog/pg_type_d.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* mysql_fdw 2.8's mysql_column (mysql_fdw.h): one column of a scan's result row. */
typedef struct fdw_column
{
	Datum		value;
	unsigned long length;
	bool		is_null;
	bool		error;
	MYSQL_BIND *mysql_bind;
} fdw_column;

/* Exported whatever the default visibility: mysql_fdw's calls reach these (see the head of this file). */
#define INTERPOSED __attribute__((visibility("default")))
extern INTERPOSED void mysql_bind_sql_var(Oid type, int attnum, Datum value, MYSQL_BIND *binds, bool *isnull);
extern INTERPOSED void mysql_bind_result(Oid pgtyp, int pgtypmod, MYSQL_FIELD *field, fdw_column *column);
extern INTERPOSED Datum mysql_convert_to_pg(Oid pgtyp, int pgtypmod, fdw_column *column);

typedef void (*bind_value_fn) (Oid type, int attnum, Datum value, MYSQL_BIND *binds, bool *isnull);
typedef void (*bind_result_fn) (Oid pgtyp, int pgtypmod, MYSQL_FIELD *field, fdw_column *column);
typedef Datum (*convert_fn) (Oid pgtyp, int pgtypmod, fdw_column *column);

/* mysql_fdw's own definition of `name`, from mysql_fdw.so (never this library's). */
static void *
fdw_function(const char *name)
{
	return (void *) load_external_function("mysql_fdw", name, true, NULL);
}

/* A timestamp as MariaDB's DATETIME, microseconds included; refused when DATETIME has no such value. */
static MYSQL_TIME *
datetime_of(Timestamp value)
{
	struct pg_tm tm;
	fsec_t		fsec;
	MYSQL_TIME *t = palloc0(sizeof(MYSQL_TIME));

	/* No time zone: a timestamp without one is the wall-clock time written, in any session. */
	if (TIMESTAMP_NOT_FINITE(value) || timestamp2tm(value, NULL, &tm, &fsec, NULL, NULL) != 0 || tm.tm_year < 1 || tm.tm_year > 9999)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("kcm: timestamp %s is outside what a shard's DATETIME holds (years 1 to 9999); nothing was written",
						DatumGetCString(DirectFunctionCall1(timestamp_out, TimestampGetDatum(value))))));
	t->year = tm.tm_year;
	t->month = tm.tm_mon;
	t->day = tm.tm_mday;
	t->hour = tm.tm_hour;
	t->minute = tm.tm_min;
	t->second = tm.tm_sec;
	t->second_part = fsec;
	t->time_type = MYSQL_TIMESTAMP_DATETIME;
	return t;
}

/* A time of day (microseconds since midnight, up to 24:00:00) as MariaDB's TIME. */
static MYSQL_TIME *
time_of(TimeADT value)
{
	MYSQL_TIME *t = palloc0(sizeof(MYSQL_TIME));

	t->hour = value / USECS_PER_HOUR;
	value -= (TimeADT) t->hour * USECS_PER_HOUR;
	t->minute = value / USECS_PER_MINUTE;
	value -= (TimeADT) t->minute * USECS_PER_MINUTE;
	t->second = value / USECS_PER_SEC;
	t->second_part = value - (TimeADT) t->second * USECS_PER_SEC;
	t->time_type = MYSQL_TIMESTAMP_TIME;
	return t;
}

/* A numeric as the decimal text MariaDB reads into an exact DECIMAL; NaN and infinities have none. */
static char *
decimal_of(Datum value)
{
	Numeric		n = DatumGetNumeric(value);

	if (numeric_is_nan(n) || numeric_is_inf(n))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("kcm: numeric %s has no MariaDB DECIMAL form; nothing was written",
						DatumGetCString(DirectFunctionCall1(numeric_out, value)))));
	return DatumGetCString(DirectFunctionCall1(numeric_out, value));
}

void
mysql_bind_sql_var(Oid type, int attnum, Datum value, MYSQL_BIND *binds, bool *isnull)
{
	static bind_value_fn fdw_bind = NULL;
	MYSQL_BIND *bind = &binds[attnum];

	if (type != TIMESTAMPOID && type != TIMEOID && type != NUMERICOID)
	{
		if (fdw_bind == NULL)
			fdw_bind = (bind_value_fn) fdw_function("mysql_bind_sql_var");
		fdw_bind(type, attnum, value, binds, isnull);
		return;
	}
	/* The same contract as mysql_fdw's: the slot cleared, NULL through is_null, else a buffer the statement reads. */
	memset(bind, 0, sizeof(MYSQL_BIND));
	bind->is_null = (my_bool *) isnull;
	if (*isnull)
		return;
	switch (type)
	{
		case TIMESTAMPOID:
			bind->buffer_type = MYSQL_TYPE_DATETIME;
			bind->buffer = datetime_of(DatumGetTimestamp(value));
			bind->buffer_length = sizeof(MYSQL_TIME);
			break;
		case TIMEOID:
			bind->buffer_type = MYSQL_TYPE_TIME;
			bind->buffer = time_of(DatumGetTimeADT(value));
			bind->buffer_length = sizeof(MYSQL_TIME);
			break;
		default:
			/* A DECIMAL parameter, so that a comparison with a DECIMAL column is exact too (a string would compare as a double). */
			bind->buffer_type = MYSQL_TYPE_NEWDECIMAL;
			bind->buffer = decimal_of(value);
			bind->buffer_length = strlen((char *) bind->buffer);
			break;
	}
}

/*
 * A real read from a FLOAT column is fetched as the 4-byte float itself, not as text; any
 * other column goes to mysql_fdw's own, which fetches text.
 */
void
mysql_bind_result(Oid pgtyp, int pgtypmod, MYSQL_FIELD *field, fdw_column *column)
{
	static bind_result_fn fdw_bind_result = NULL;
	MYSQL_BIND *bind = column->mysql_bind;

	if (pgtyp != FLOAT4OID || field->type != MYSQL_TYPE_FLOAT)
	{
		if (fdw_bind_result == NULL)
			fdw_bind_result = (bind_result_fn) fdw_function("mysql_bind_result");
		fdw_bind_result(pgtyp, pgtypmod, field, column);
		return;
	}
	memset(bind, 0, sizeof(MYSQL_BIND));
	bind->is_null = (my_bool *) &column->is_null;
	bind->error = (my_bool *) &column->error;
	bind->length = &column->length;
	bind->buffer_type = MYSQL_TYPE_FLOAT;
	column->value = PointerGetDatum(palloc0(sizeof(float4)));
	bind->buffer = DatumGetPointer(column->value);
	bind->buffer_length = sizeof(float4);
}

Datum
mysql_convert_to_pg(Oid pgtyp, int pgtypmod, fdw_column *column)
{
	static convert_fn fdw_convert = NULL;

	/* mysql_fdw's own binds are text or BLOB: a FLOAT buffer is one bound above. */
	if (pgtyp == FLOAT4OID && column->mysql_bind->buffer_type == MYSQL_TYPE_FLOAT)
		return Float4GetDatum(*(float4 *) DatumGetPointer(column->value));
	if (fdw_convert == NULL)
		fdw_convert = (convert_fn) fdw_function("mysql_convert_to_pg");
	return fdw_convert(pgtyp, pgtypmod, column);
}
