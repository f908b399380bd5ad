#ifndef C_SPARK_CURL_H
#define C_SPARK_CURL_H

#include <stddef.h>
#include <stdint.h>

/// The domain client's HTTP transport: libcurl's multi interface on one thread of its own, so
/// any number of requests (long-polls included) are in flight without holding a thread each,
/// and connections are kept alive and reused. A domain's client trusts only its own domain: the
/// CA file it is given (never the system's store) and, if given, a pinned public key; an
/// identity provider's client may trust the system's store.

typedef struct spark_curl_client spark_curl_client;

/// Called once per request on the client's thread. `status` is the HTTP status, or, when no
/// response arrived, 0 or libcurl's error code negated (then `error` says why). `retry_after` and
/// `cache_control` are those headers, or NULL.
typedef void (*spark_curl_done)(
    void *context, long status, const uint8_t *body, size_t length, const char *retry_after, const char *cache_control,
    const char *error);

/// A client. `ca_file`: the PEM CA file to trust, or the PEM text itself (it starts with
/// `-----BEGIN`) (NULL: plain HTTP only, or a pin alone);
/// `pinned_key`: curl's "sha256//BASE64" form or NULL; `system_store`: nonzero to trust the
/// machine's CA store (an identity provider on the public internet), with `ca_file` NULL. NULL
/// when libcurl cannot start.
spark_curl_client *spark_curl_client_new(
    const char *ca_file, const char *pinned_key, int system_store, long connect_timeout_ms);
/// Stops the client's thread; requests still in flight complete with status 0.
void spark_curl_client_free(spark_curl_client *client);
/// Starts a request; `done` is called exactly once. `headers` holds `header_count` "Name: value"
/// lines. `body` may be NULL for none. At most `maximum_response` bytes of the answer's body are
/// read (0: 64 MiB, also the most there is): a larger one fails the request, its reading stopped
/// at the cap. 0 when it could not even be queued (then `done` is not called).
int spark_curl_request(
    spark_curl_client *client, const char *method, const char *url, const char *const *headers, size_t header_count,
    const uint8_t *body, size_t length, long timeout_ms, size_t maximum_response, spark_curl_done done, void *context);

#endif
