// The Secret Service through libsecret, opened with dlopen so that SparkSDK neither builds nor
// runs against it unless it is there. Only the `v` (GHashTable) entry points are used: the
// variadic ones cannot be called through a pointer portably.
#include "CSparkSecret.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct GHashTable GHashTable;
typedef struct { unsigned int domain; int code; char *message; } GError;
typedef struct { const char *name; int type; } SecretSchemaAttribute;
// > libsecret's SecretSchema: name, flags, 32 attributes, then reserved members.
typedef struct {
    const char *name;
    int flags;
    SecretSchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} SecretSchema;

static struct {
    int loaded;
    GHashTable *(*hash_table_new)(unsigned int (*)(const void *), int (*)(const void *, const void *));
    unsigned int (*str_hash)(const void *);
    int (*str_equal)(const void *, const void *);
    int (*hash_table_insert)(GHashTable *, void *, void *);
    void (*hash_table_unref)(GHashTable *);
    void (*error_free)(GError *);
    int (*storev_sync)(const SecretSchema *, GHashTable *, const char *, const char *, const char *, void *, GError **);
    char *(*lookupv_sync)(const SecretSchema *, GHashTable *, void *, GError **);
    int (*clearv_sync)(const SecretSchema *, GHashTable *, void *, GError **);
    void (*password_free)(char *);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *secret = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    void *glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_LOCAL);
    if (secret == NULL || glib == NULL) return;
    *(void **)&api.hash_table_new = dlsym(glib, "g_hash_table_new");
    *(void **)&api.str_hash = dlsym(glib, "g_str_hash");
    *(void **)&api.str_equal = dlsym(glib, "g_str_equal");
    *(void **)&api.hash_table_insert = dlsym(glib, "g_hash_table_insert");
    *(void **)&api.hash_table_unref = dlsym(glib, "g_hash_table_unref");
    *(void **)&api.error_free = dlsym(glib, "g_error_free");
    *(void **)&api.storev_sync = dlsym(secret, "secret_password_storev_sync");
    *(void **)&api.lookupv_sync = dlsym(secret, "secret_password_lookupv_sync");
    *(void **)&api.clearv_sync = dlsym(secret, "secret_password_clearv_sync");
    *(void **)&api.password_free = dlsym(secret, "secret_password_free");
    api.loaded = api.hash_table_new && api.str_hash && api.str_equal && api.hash_table_insert && api.hash_table_unref
        && api.error_free && api.storev_sync && api.lookupv_sync && api.clearv_sync && api.password_free;
}

static const SecretSchema schema = {
    "org.sparksdk.EndpointStore", 0, {{"store", 0}, {NULL, 0}}, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static GHashTable *attributes(const char *name) {
    GHashTable *table = api.hash_table_new(api.str_hash, api.str_equal);
    api.hash_table_insert(table, (void *)"store", (void *)name);
    return table;
}

int spark_secret_available(void) {
    const char *switch_ = getenv("SPARK_SECRET_SERVICE");
    if (switch_ != NULL && strcmp(switch_, "off") == 0) return 0;
    if (getenv("DBUS_SESSION_BUS_ADDRESS") == NULL) return 0;
    pthread_once(&once, load);
    return api.loaded;
}

char *spark_secret_lookup(const char *name) {
    if (!spark_secret_available()) return NULL;
    GError *error = NULL;
    GHashTable *table = attributes(name);
    char *found = api.lookupv_sync(&schema, table, NULL, &error);
    api.hash_table_unref(table);
    if (error != NULL) api.error_free(error);
    if (found == NULL) return NULL;
    char *copy = strdup(found);
    api.password_free(found);
    return copy;
}

int spark_secret_store(const char *name, const char *secret, const char *label) {
    if (!spark_secret_available()) return 0;
    GError *error = NULL;
    GHashTable *table = attributes(name);
    int stored = api.storev_sync(&schema, table, "default", label, secret, NULL, &error);
    api.hash_table_unref(table);
    if (error != NULL) {
        api.error_free(error);
        return 0;
    }
    return stored;
}

int spark_secret_clear(const char *name) {
    if (!spark_secret_available()) return 0;
    GError *error = NULL;
    GHashTable *table = attributes(name);
    int cleared = api.clearv_sync(&schema, table, NULL, &error);
    api.hash_table_unref(table);
    if (error != NULL) api.error_free(error);
    return cleared;
}

void spark_secret_free(char *secret) {
    if (secret == NULL) return;
    volatile char *bytes = secret;
    for (size_t index = 0; bytes[index] != 0; index++) bytes[index] = 0;
    free(secret);
}
