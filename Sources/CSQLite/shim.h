// SQLite 3 for Swift. Only what Swift cannot import directly gets a wrapper here.
#ifndef SPARK_CSQLITE_SHIM_H
#define SPARK_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro ((sqlite3_destructor_type)-1), which Swift cannot import.
static inline sqlite3_destructor_type spark_SQLITE_TRANSIENT(void) { return SQLITE_TRANSIENT; }

// sqlite3_db_config is variadic; this fixes the (int, int*) form used for boolean options.
static inline int spark_sqlite3_db_config_bool(sqlite3 *db, int op, int value, int *result) {
    return sqlite3_db_config(db, op, value, result);
}

#endif
