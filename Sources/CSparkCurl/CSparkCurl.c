// The domain client's transport: one libcurl multi handle driven by a thread of its own. New
// requests are queued under a lock and the thread is woken with curl_multi_wakeup.
#include "CSparkCurl.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { MAXIMUM_RESPONSE = 64 * 1024 * 1024 };

struct transfer {
    struct transfer *next;
    struct transfer *active_next;
    struct transfer *active_previous;
    CURL *easy;
    struct curl_slist *headers;
    uint8_t *request_body;
    uint8_t *body;
    size_t length;
    size_t capacity;
    /// The most bytes of body kept: reading stops at it (the transfer fails as too large).
    size_t maximum;
    int overflow;
    char retry_after[32];
    int has_retry_after;
    char cache_control[256];
    int has_cache_control;
    char error[CURL_ERROR_SIZE];
    spark_curl_done done;
    void *context;
};

struct spark_curl_client {
    CURLM *multi;
    pthread_t thread;
    pthread_mutex_t lock;
    struct transfer *queued;
    struct transfer *active;
    int stopping;
    char *ca_file;
    char *pinned_key;
    long connect_timeout_ms;
    int system_store;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_ok;
static void global_init(void) { global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

static size_t write_body(char *data, size_t size, size_t count, void *user) {
    struct transfer *transfer = user;
    size_t bytes = size * count;
    if (bytes > transfer->maximum || transfer->length > transfer->maximum - bytes) {
        transfer->overflow = 1;
        return 0;
    }
    if (transfer->length + bytes > transfer->capacity) {
        size_t capacity = transfer->capacity ? transfer->capacity : 4096;
        while (capacity < transfer->length + bytes) capacity *= 2;
        uint8_t *grown = realloc(transfer->body, capacity);
        if (!grown) return 0;
        transfer->body = grown;
        transfer->capacity = capacity;
    }
    memcpy(transfer->body + transfer->length, data, bytes);
    transfer->length += bytes;
    return bytes;
}

/// Copies the value of header `name` (lower case, with its colon) from `data` into `out`.
static int header_value(const char *data, size_t bytes, const char *name, char *out, size_t capacity) {
    size_t name_length = strlen(name);
    if (bytes <= name_length || strncasecmp(data, name, name_length) != 0) return 0;
    size_t start = name_length;
    while (start < bytes && (data[start] == ' ' || data[start] == '\t')) start++;
    size_t end = bytes;
    while (end > start && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' ')) end--;
    size_t length = end - start < capacity - 1 ? end - start : capacity - 1;
    memcpy(out, data + start, length);
    out[length] = 0;
    return 1;
}

static size_t read_header(char *data, size_t size, size_t count, void *user) {
    struct transfer *transfer = user;
    size_t bytes = size * count;
    if (header_value(data, bytes, "retry-after:", transfer->retry_after, sizeof transfer->retry_after))
        transfer->has_retry_after = 1;
    if (header_value(data, bytes, "cache-control:", transfer->cache_control, sizeof transfer->cache_control))
        transfer->has_cache_control = 1;
    return bytes;
}

static void finish(struct transfer *transfer, long status, const char *error) {
    transfer->done(
        transfer->context, status, transfer->body, transfer->length, transfer->has_retry_after ? transfer->retry_after : NULL,
        transfer->has_cache_control ? transfer->cache_control : NULL, error);
    curl_slist_free_all(transfer->headers);
    if (transfer->easy) curl_easy_cleanup(transfer->easy);
    free(transfer->request_body);
    free(transfer->body);
    free(transfer);
}

static void unlink_active(struct spark_curl_client *client, struct transfer *transfer) {
    if (transfer->active_previous) transfer->active_previous->active_next = transfer->active_next;
    else client->active = transfer->active_next;
    if (transfer->active_next) transfer->active_next->active_previous = transfer->active_previous;
}

static void *run(void *argument) {
    struct spark_curl_client *client = argument;
    for (;;) {
        pthread_mutex_lock(&client->lock);
        struct transfer *queued = client->queued;
        client->queued = NULL;
        int stopping = client->stopping;
        pthread_mutex_unlock(&client->lock);
        while (queued) {
            struct transfer *next = queued->next;
            if (stopping || curl_multi_add_handle(client->multi, queued->easy) != CURLM_OK) {
                finish(queued, 0, "the client stopped");
            } else {
                queued->active_next = client->active;
                queued->active_previous = NULL;
                if (client->active) client->active->active_previous = queued;
                client->active = queued;
            }
            queued = next;
        }
        if (stopping) break;
        int running = 0;
        curl_multi_perform(client->multi, &running);
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(client->multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            CURL *easy = message->easy_handle;
            struct transfer *transfer = NULL;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&transfer);
            curl_multi_remove_handle(client->multi, easy);
            unlink_active(client, transfer);
            if (message->data.result == CURLE_OK) {
                long status = 0;
                curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
                finish(transfer, status, NULL);
            } else {
                const char *reason = transfer->error[0] ? transfer->error : curl_easy_strerror(message->data.result);
                if (transfer->overflow || message->data.result == CURLE_FILESIZE_EXCEEDED) {
                    reason = "the response is larger than the most this request takes";
                }
                // A failure's status is libcurl's code, negated (the caller tells "could not
                // connect", when nothing was sent, from the rest).
                finish(transfer, -(long)message->data.result, reason);
            }
        }
        curl_multi_poll(client->multi, NULL, 0, 1000, NULL);
    }
    // Whatever is still in flight ends now.
    while (client->active) {
        struct transfer *transfer = client->active;
        unlink_active(client, transfer);
        curl_multi_remove_handle(client->multi, transfer->easy);
        finish(transfer, 0, "the client stopped");
    }
    return NULL;
}

spark_curl_client *spark_curl_client_new(
    const char *ca_file, const char *pinned_key, int system_store, long connect_timeout_ms) {
    pthread_once(&global_once, global_init);
    if (!global_ok) return NULL;
    struct spark_curl_client *client = calloc(1, sizeof *client);
    if (!client) return NULL;
    client->multi = curl_multi_init();
    client->ca_file = ca_file ? strdup(ca_file) : NULL;
    client->pinned_key = pinned_key ? strdup(pinned_key) : NULL;
    client->connect_timeout_ms = connect_timeout_ms;
    client->system_store = system_store;
    pthread_mutex_init(&client->lock, NULL);
    if (!client->multi) {
        free(client);
        return NULL;
    }
    curl_multi_setopt(client->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 64L);
    if (pthread_create(&client->thread, NULL, run, client) != 0) {
        curl_multi_cleanup(client->multi);
        free(client);
        return NULL;
    }
    return client;
}

void spark_curl_client_free(spark_curl_client *client) {
    pthread_mutex_lock(&client->lock);
    client->stopping = 1;
    pthread_mutex_unlock(&client->lock);
    curl_multi_wakeup(client->multi);
    pthread_join(client->thread, NULL);
    struct transfer *queued = client->queued;
    while (queued) {
        struct transfer *next = queued->next;
        finish(queued, 0, "the client stopped");
        queued = next;
    }
    curl_multi_cleanup(client->multi);
    pthread_mutex_destroy(&client->lock);
    free(client->ca_file);
    free(client->pinned_key);
    free(client);
}

int spark_curl_request(
    spark_curl_client *client, const char *method, const char *url, const char *const *headers, size_t header_count,
    const uint8_t *body, size_t length, long timeout_ms, size_t maximum_response, spark_curl_done done, void *context) {
    struct transfer *transfer = calloc(1, sizeof *transfer);
    if (!transfer) return 0;
    transfer->maximum = maximum_response && maximum_response < MAXIMUM_RESPONSE ? maximum_response : MAXIMUM_RESPONSE;
    transfer->done = done;
    transfer->context = context;
    transfer->easy = curl_easy_init();
    if (!transfer->easy) {
        free(transfer);
        return 0;
    }
    CURL *easy = transfer->easy;
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, transfer);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer->error);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, transfer);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, read_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, transfer);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, client->connect_timeout_ms);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    // A declared length over the cap is refused before any of the body is read.
    curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)transfer->maximum);
    if (!client->system_store) curl_easy_setopt(easy, CURLOPT_CAPATH, NULL);
    if (client->ca_file && strncmp(client->ca_file, "-----BEGIN", 10) == 0) {
        // The CA's PEM text itself (kept in a database, not in a file on this machine).
        struct curl_blob blob = {client->ca_file, strlen(client->ca_file), CURL_BLOB_COPY};
        curl_easy_setopt(easy, CURLOPT_CAINFO, NULL);
        curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &blob);
    } else if (client->ca_file) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, client->ca_file);
    } else if (client->pinned_key) {
        // A pin alone: the key is the trust, so the chain and name are not checked.
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (!client->system_store) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, NULL);
    }
    if (client->pinned_key) curl_easy_setopt(easy, CURLOPT_PINNEDPUBLICKEY, client->pinned_key);
    for (size_t i = 0; i < header_count; i++) transfer->headers = curl_slist_append(transfer->headers, headers[i]);
    transfer->headers = curl_slist_append(transfer->headers, "Expect:");
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer->headers);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    } else {
        if (length) {
            transfer->request_body = malloc(length);
            if (!transfer->request_body) {
                curl_easy_cleanup(easy);
                curl_slist_free_all(transfer->headers);
                free(transfer);
                return 0;
            }
            memcpy(transfer->request_body, body, length);
        }
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, transfer->request_body ? (char *)transfer->request_body : "");
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)length);
        if (strcmp(method, "POST") != 0) curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    }
    pthread_mutex_lock(&client->lock);
    transfer->next = client->queued;
    client->queued = transfer;
    pthread_mutex_unlock(&client->lock);
    curl_multi_wakeup(client->multi);
    return 1;
}
