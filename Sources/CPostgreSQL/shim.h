// libpq (PostgreSQL's client library) for Swift. libpq has no macros Swift needs wrapped; the
// shim only gives the import one header, as the other system library targets do.
#ifndef SPARK_CPOSTGRESQL_SHIM_H
#define SPARK_CPOSTGRESQL_SHIM_H

#include <libpq-fe.h>

#endif
