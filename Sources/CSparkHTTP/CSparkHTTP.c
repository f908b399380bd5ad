// The HTTP server of spark-domaind on libmicrohttpd. A request's body is gathered here (up to
// the cap), then the connection is suspended and the whole request handed to Swift; Swift answers
// from any thread, which stores the response and resumes the connection, and libmicrohttpd calls
// the access handler once more to queue it. A request is shared by two owners (the server until
// the connection is done with it, Swift until it answers) and freed when both let go.
#include "CSparkHTTP.h"
#include "CSparkProxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct spark_http_server {
    struct MHD_Daemon *daemon;
    /// Requests handed out and not yet taken back by the server after their answer: while
    /// any is, the connection is suspended, and libmicrohttpd must not be stopped.
    atomic_int suspended;
    /// Set by spark_http_close: new requests are answered 503 at once, never handed out.
    atomic_int closing;
    spark_http_handler handler;
    void *context;
    size_t maximum_body;
    uint16_t port;
    /// Set when proxies are configured: the server's own listening socket and its acceptor.
    struct spark_proxy_acceptor *acceptor;
    pthread_mutex_t acceptor_lock;
};

enum request_state { GATHERING, TOO_LARGE, HANDED_OUT, ANSWERED, QUEUED };

struct spark_http_request {
    atomic_int owners;
    pthread_mutex_t lock;
    enum request_state state;
    struct MHD_Connection *connection;
    char *method;
    char *path;
    char address[64];
    uint8_t *body;
    size_t length;
    size_t capacity;
    struct MHD_Response *response;
    unsigned status;
};

static void release(struct spark_http_request *request) {
    if (atomic_fetch_sub(&request->owners, 1) != 1) return;
    if (request->response) MHD_destroy_response(request->response);
    pthread_mutex_destroy(&request->lock);
    free(request->method);
    free(request->path);
    free(request->body);
    free(request);
}

static struct spark_http_request *make_request(struct MHD_Connection *connection, const char *method, const char *url) {
    struct spark_http_request *request = calloc(1, sizeof *request);
    if (!request) return NULL;
    atomic_init(&request->owners, 1);
    pthread_mutex_init(&request->lock, NULL);
    request->connection = connection;
    request->method = strdup(method);
    request->path = strdup(url);
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info && info->client_addr) {
        const struct sockaddr *address = info->client_addr;
        if (address->sa_family == AF_INET) {
            inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, request->address, sizeof request->address);
        } else if (address->sa_family == AF_INET6) {
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, request->address, sizeof request->address);
        }
    }
    if (!request->method || !request->path) {
        release(request);
        return NULL;
    }
    return request;
}

static enum MHD_Result queue_text(struct MHD_Connection *connection, unsigned status, const char *json) {
    struct MHD_Response *response = MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_PERSISTENT);
    if (!response) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", "application/json");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

static const char closing_body[] =
    "{\"code\":\"unavailable\",\"message\":\"the server is shutting down\",\"retryAfter\":1}";

static const char too_large_body[] =
    "{\"code\":\"tooLarge\",\"message\":\"the request body is larger than this server accepts\"}";

// The most query parameters a request may carry (the wire's operations take at most four), and
// the longest query string (theirs are a few hundred bytes at most). libmicrohttpd 0.9.75 parses
// every parameter of the request line into the connection's memory pool before calling anything
// of ours, and when that fills the pool (a thousand `&a=` in 7 KB, or one parameter that brings
// the request line within a few dozen bytes of the pool's size) it neither answers nor closes:
// the connection hangs until the idle timeout. So both are checked first, in the URI callback,
// which libmicrohttpd calls with its own writable copy of the request line just before it parses
// the parameters: a request over a cap has its query cut there (so nothing is parsed) and is
// marked, and the handler answers it 400 or 414.
enum { MAXIMUM_QUERY_PARAMETERS = 64, MAXIMUM_QUERY_LENGTH = 4096 };
static char too_many_parameters_marker;
static char query_too_long_marker;
static const char *too_many_parameters_body =
    "{\"code\":\"invalidRequest\",\"message\":\"too many query parameters (at most 64)\"}";
static const char *query_too_long_body =
    "{\"code\":\"invalidRequest\",\"message\":\"the query string is too long (at most 4096 bytes)\"}";

static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *connection) {
    (void)cls;
    (void)connection;
    char *query = strchr(uri, '?');
    if (!query) return NULL;
    size_t separators = 0;
    size_t length = 0;
    for (const char *c = query + 1; *c; c++, length++) {
        if (*c == '&' || *c == ';') separators++;
    }
    void *marker = NULL;
    if (length > MAXIMUM_QUERY_LENGTH) {
        marker = &query_too_long_marker;
    } else if (separators >= MAXIMUM_QUERY_PARAMETERS) {
        marker = &too_many_parameters_marker;
    }
    if (marker) query[1] = '\0';
    return marker;
}

static int is_marker(void *context) { return context == &too_many_parameters_marker || context == &query_too_long_marker; }

static enum MHD_Result access_handler(
    void *cls, struct MHD_Connection *connection, const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version;
    struct spark_http_server *server = cls;
    if (is_marker(*con_cls)) {
        *upload_data_size = 0;
        return *con_cls == &query_too_long_marker ? queue_text(connection, 414, query_too_long_body)
                                                  : queue_text(connection, 400, too_many_parameters_body);
    }
    struct spark_http_request *request = *con_cls;
    if (!request) {
        request = make_request(connection, method, url);
        if (!request) return MHD_NO;
        *con_cls = request;
        const char *declared = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Content-Length");
        if (declared && strtoull(declared, NULL, 10) > server->maximum_body) request->state = TOO_LARGE;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (request->state == GATHERING) {
            size_t needed = request->length + *upload_data_size;
            if (needed > server->maximum_body) {
                request->state = TOO_LARGE;
            } else {
                if (needed > request->capacity) {
                    size_t capacity = request->capacity ? request->capacity : 1024;
                    while (capacity < needed) capacity *= 2;
                    if (capacity > server->maximum_body) capacity = server->maximum_body;
                    uint8_t *grown = realloc(request->body, capacity);
                    if (!grown) return MHD_NO;
                    request->body = grown;
                    request->capacity = capacity;
                }
                memcpy(request->body + request->length, upload_data, *upload_data_size);
                request->length = needed;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&request->lock);
    enum request_state state = request->state;
    pthread_mutex_unlock(&request->lock);
    switch (state) {
    case TOO_LARGE:
        request->state = QUEUED;
        return queue_text(connection, 413, too_large_body);
    case GATHERING:
        if (atomic_load(&server->closing)) {
            request->state = QUEUED;
            return queue_text(connection, 503, closing_body);
        }
        atomic_fetch_add(&server->suspended, 1);
        pthread_mutex_lock(&request->lock);
        request->state = HANDED_OUT;
        pthread_mutex_unlock(&request->lock);
        atomic_fetch_add(&request->owners, 1);
        MHD_suspend_connection(connection);
        server->handler(server->context, request);
        return MHD_YES;
    case HANDED_OUT:
        // Woken before the answer was stored (cannot happen: resume follows the answer).
        return MHD_YES;
    case ANSWERED: {
        pthread_mutex_lock(&request->lock);
        request->state = QUEUED;
        struct MHD_Response *response = request->response;
        request->response = NULL;
        unsigned status = request->status;
        pthread_mutex_unlock(&request->lock);
        enum MHD_Result result = MHD_queue_response(connection, status, response);
        MHD_destroy_response(response);
        atomic_fetch_sub(&server->suspended, 1);
        return result;
    }
    case QUEUED:
        return MHD_YES;
    }
    return MHD_NO;
}

static void completed(
    void *cls, struct MHD_Connection *connection, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)cls;
    (void)connection;
    (void)code;
    struct spark_http_request *request = *con_cls;
    if (request && !is_marker(*con_cls)) release(request);
    *con_cls = NULL;
}

static void log_nothing(void *cls, const char *format, va_list arguments) {
    (void)cls;
    (void)format;
    (void)arguments;
}

spark_http_server *spark_http_start(
    const spark_http_options *options, spark_http_handler handler, void *context, char *error, size_t error_size) {
    struct spark_http_server *server = calloc(1, sizeof *server);
    if (!server) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    server->handler = handler;
    server->context = context;
    server->maximum_body = options->maximum_body;

    struct sockaddr_storage storage;
    memset(&storage, 0, sizeof storage);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
    if (inet_pton(AF_INET, options->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(options->port);
    } else if (inet_pton(AF_INET6, options->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(options->port);
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(error, error_size, "'%s' is not an IP address to listen on", options->host);
        free(server);
        return NULL;
    }
    int tls = options->certificate_pem && options->key_pem;
    if (tls) flags |= MHD_USE_TLS;

    // Behind proxies the server accepts itself (CSparkProxy.c) and libmicrohttpd gets each
    // connection with its client's address.
    size_t proxy_count = options->proxy_address_count;
    struct in6_addr *proxies = NULL;
    int listen_fd = -1;
    if (proxy_count) {
        proxies = calloc(proxy_count, sizeof *proxies);
        if (!proxies) {
            snprintf(error, error_size, "out of memory");
            free(server);
            return NULL;
        }
        for (size_t i = 0; i < proxy_count; i++) {
            if (!spark_proxy_address(options->proxy_addresses[i], &proxies[i])) {
                snprintf(error, error_size, "'%s' is not a proxy's IP address", options->proxy_addresses[i]);
                free(proxies);
                free(server);
                return NULL;
            }
        }
        int family = storage.ss_family;
        listen_fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int yes = 1;
        socklen_t length = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        if (listen_fd < 0 || setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0
            || bind(listen_fd, (struct sockaddr *)&storage, length) != 0 || listen(listen_fd, 4096) != 0) {
            snprintf(
                error, error_size, "cannot listen on %s port %u (in use or not permitted)", options->host,
                (unsigned)options->port);
            if (listen_fd >= 0) close(listen_fd);
            free(proxies);
            free(server);
            return NULL;
        }
        struct sockaddr_storage bound;
        socklen_t bound_length = sizeof bound;
        getsockname(listen_fd, (struct sockaddr *)&bound, &bound_length);
        server->port = ntohs(
            bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port : ((struct sockaddr_in6 *)&bound)->sin6_port);
        flags |= MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    }

    struct MHD_OptionItem items[16];
    size_t count = 0;
    if (!proxy_count) items[count++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &storage};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, options->threads ? options->threads : 1, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, options->connection_limit, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, options->per_address_limit, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, options->idle_timeout, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, 8 * 1024, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uri_seen, NULL};
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)log_nothing, NULL};
    if (!proxy_count) items[count++] = (struct MHD_OptionItem){MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL};
    if (tls) {
        items[count++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)options->certificate_pem};
        items[count++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)options->key_pem};
    }
    items[count++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    server->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, access_handler, server, MHD_OPTION_ARRAY, items, MHD_OPTION_END);
    if (!server->daemon) {
        snprintf(
            error, error_size, "cannot listen on %s port %u (in use, not permitted, or a bad certificate or key)",
            options->host, (unsigned)options->port);
        if (listen_fd >= 0) close(listen_fd);
        free(proxies);
        free(server);
        return NULL;
    }
    pthread_mutex_init(&server->acceptor_lock, NULL);
    if (proxy_count) {
        server->acceptor = spark_proxy_start(server->daemon, listen_fd, proxies, proxy_count, error, error_size);
        free(proxies);
        if (!server->acceptor) {
            close(listen_fd);
            MHD_stop_daemon(server->daemon);
            pthread_mutex_destroy(&server->acceptor_lock);
            free(server);
            return NULL;
        }
        return server;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    server->port = info ? info->port : options->port;
    return server;
}

uint16_t spark_http_port(const spark_http_server *server) { return server->port; }

/// Stops the server's own acceptor, if it has one and it runs.
static void stop_acceptor(spark_http_server *server) {
    pthread_mutex_lock(&server->acceptor_lock);
    struct spark_proxy_acceptor *acceptor = server->acceptor;
    server->acceptor = NULL;
    pthread_mutex_unlock(&server->acceptor_lock);
    spark_proxy_stop(acceptor);
}

void spark_http_quiesce(spark_http_server *server) {
    // Behind proxies the socket is the acceptor's (libmicrohttpd has none to give back).
    stop_acceptor(server);
    MHD_socket socket = MHD_quiesce_daemon(server->daemon);
    if (socket != MHD_INVALID_SOCKET) close(socket);
}

void spark_http_stop(spark_http_server *server) {
    stop_acceptor(server);
    MHD_stop_daemon(server->daemon);
    pthread_mutex_destroy(&server->acceptor_lock);
    free(server);
}

void spark_http_close(spark_http_server *server) { atomic_store(&server->closing, 1); }

unsigned spark_http_suspended(const spark_http_server *server) {
    int count = atomic_load(&server->suspended);
    return count > 0 ? (unsigned)count : 0;
}

unsigned spark_http_connections(const spark_http_server *server) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info ? info->num_connections : 0;
}

const char *spark_http_method(const spark_http_request *request) { return request->method; }
const char *spark_http_path(const spark_http_request *request) { return request->path; }
const char *spark_http_client_address(const spark_http_request *request) { return request->address; }

const char *spark_http_header(const spark_http_request *request, const char *name) {
    return MHD_lookup_connection_value(request->connection, MHD_HEADER_KIND, name);
}

const char *spark_http_argument(const spark_http_request *request, const char *name) {
    return MHD_lookup_connection_value(request->connection, MHD_GET_ARGUMENT_KIND, name);
}

struct name_list {
    char *text;
    size_t length;
};

static enum MHD_Result append_name(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    (void)value;
    struct name_list *list = cls;
    size_t key_length = strlen(key);
    char *grown = realloc(list->text, list->length + key_length + 2);
    if (!grown) return MHD_NO;
    list->text = grown;
    if (list->length) list->text[list->length++] = '&';
    memcpy(list->text + list->length, key, key_length);
    list->length += key_length;
    list->text[list->length] = 0;
    return MHD_YES;
}

char *spark_http_argument_names(const spark_http_request *request) {
    struct name_list list = {calloc(1, 1), 0};
    if (!list.text) return NULL;
    MHD_get_connection_values(request->connection, MHD_GET_ARGUMENT_KIND, append_name, &list);
    return list.text;
}

const uint8_t *spark_http_body(const spark_http_request *request, size_t *length) {
    *length = request->length;
    return request->body;
}

void spark_http_respond(
    spark_http_request *request, unsigned status, const char *content_type, const uint8_t *body, size_t length,
    const char *const *header_names, const char *const *header_values, size_t header_count) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response) {
        if (content_type) MHD_add_response_header(response, "Content-Type", content_type);
        for (size_t i = 0; i < header_count; i++) MHD_add_response_header(response, header_names[i], header_values[i]);
    } else {
        response = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        status = 503;
    }
    pthread_mutex_lock(&request->lock);
    request->response = response;
    request->status = status;
    request->state = ANSWERED;
    pthread_mutex_unlock(&request->lock);
    MHD_resume_connection(request->connection);
    release(request);
}
