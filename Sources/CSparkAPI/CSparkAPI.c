// The parts of the C API that are plain C: the thread's last error, the status names, the
// version, and freeing strings. The rest is Swift (`Sources/SparkC`), behind the same header.
#include "spark/spark.h"
#include "spark_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

int spark_internal_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE); }

static _Thread_local char *last_error;

void spark_internal_set_error(const char *message) {
    free(last_error);
    last_error = message ? strdup(message) : NULL;
}

const char *spark_last_error(void) { return last_error ? last_error : ""; }

const char *spark_status_name(spark_status status) {
    switch (status) {
    case SPARK_OK: return "SPARK_OK";
    case SPARK_ERR_INVALID_ARGUMENT: return "SPARK_ERR_INVALID_ARGUMENT";
    case SPARK_ERR_CONFIG: return "SPARK_ERR_CONFIG";
    case SPARK_ERR_AUTH: return "SPARK_ERR_AUTH";
    case SPARK_ERR_SETUP: return "SPARK_ERR_SETUP";
    case SPARK_ERR_NOT_READY: return "SPARK_ERR_NOT_READY";
    case SPARK_ERR_REFUSED: return "SPARK_ERR_REFUSED";
    case SPARK_ERR_NOT_FOUND: return "SPARK_ERR_NOT_FOUND";
    case SPARK_ERR_STORAGE: return "SPARK_ERR_STORAGE";
    case SPARK_ERR_UNAVAILABLE: return "SPARK_ERR_UNAVAILABLE";
    case SPARK_ERR_IDENTITY_UNCONFIRMED: return "SPARK_ERR_IDENTITY_UNCONFIRMED";
    case SPARK_ERR_INTERNAL: return "SPARK_ERR_INTERNAL";
    }
    return "SPARK_ERR_INTERNAL";
}

const char *spark_version(void) { return "1.0.0"; }

void spark_free(void *pointer) { free(pointer); }
