#ifndef C_SPARK_SECRET_H
#define C_SPARK_SECRET_H

/// The desktop Secret Service (libsecret), loaded at run time: a machine without libsecret or
/// without a session bus simply has none. Secrets are stored under the schema
/// "org.sparksdk.EndpointStore" with one attribute, "store", naming the data directory's key.

/// 1 when libsecret loads and a session bus is named in the environment.
int spark_secret_available(void);
/// The secret stored for `name`, or NULL (none, or the service failed). Free it with
/// `spark_secret_free`.
char *spark_secret_lookup(const char *name);
/// Stores `secret` for `name` in the default collection; 1 on success.
int spark_secret_store(const char *name, const char *secret, const char *label);
/// Removes the secret stored for `name`; 1 when one was removed.
int spark_secret_clear(const char *name);
/// Frees what `spark_secret_lookup` returned (wiping it first).
void spark_secret_free(char *secret);

#endif
