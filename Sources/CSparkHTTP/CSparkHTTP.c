// The HTTP/1.1 server of spark-domaind: worker threads on epoll, TLS by OpenSSL, one request at
// a time per connection.
//
// Each worker owns its connections: only its thread touches them. A connection is a small state
// machine (proxy header, handshake, reading, handed out, writing, draining) driven by `drive`
// whenever its socket is ready. A whole request is handed to Swift's callback; the connection
// then waits, watched only for a reset, and holds no buffer: OpenSSL's are released
// (SSL_MODE_RELEASE_BUFFERS) and ours freed, so an idle long-poll costs its connection, its TLS
// state and the request's handle. Swift answers from any thread: the answer is queued to the
// connection's worker and its eventfd written once for the whole queue, and the worker writes it
// out in constant time (no walk over the waiting connections).
#define _GNU_SOURCE
#include "CSparkHTTP.h"
#include "CSparkHTTPParse.h"
#include "CSparkProxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    /// How long a proxy has to send its header, and a closing connection to drain (ms).
    PROXY_HEADER_TIMEOUT = 5000,
    DRAIN_TIMEOUT = 2000,
    /// At most this much is read and discarded from a closing connection.
    DRAIN_MAXIMUM = 4 << 20,
    /// Room beyond a request's head and body cap: a record's worth (and a half) of what follows.
    READ_SLACK = 32768,
    ADDRESS_BUCKETS = 4096,
};

/// GONE: closed, and freed once the events in hand are through (one may still name it).
enum connection_state { PROXY_HEADER, HANDSHAKE, READING, HANDED_OUT, WRITING, DRAINING, GONE };

/// What a step of a connection's state machine left it waiting for.
enum step { AGAIN, WAIT_READ, WAIT_WRITE, HANDED, CLOSED };

struct worker;

struct connection {
    int fd;
    enum connection_state state;
    struct worker *worker;
    /// TLS: OpenSSL's connection, which seals and opens every record (NULL for plain HTTP).
    SSL *tls;
    /// Received bytes not yet taken by a request (NULL when none).
    uint8_t *in;
    size_t in_length, in_capacity;
    /// The answer being written.
    uint8_t *out;
    size_t out_length, out_sent;
    /// After the answer is written: close (1) or read the next request (0).
    int close_after;
    /// The request being read: its head's length (0 until it is whole), its body's framing, and
    /// a chunked body's state. (The head itself is parsed again when the request is whole.)
    size_t head_length;
    uint64_t content_length;
    uint8_t chunked, expect_continue;
    struct http_chunks chunks;
    int continue_sent;
    /// The request handed out and not yet answered.
    struct spark_http_request *pending;
    /// The client sent FIN while its request was out: closed once answered.
    int peer_closed;
    /// When it is closed unless something happens (ms, monotonic).
    long long deadline;
    /// When the request being read began (its first byte), and when its body was admitted
    /// (0: not yet): the head has `head_timeout` in all, the body a minimum rate.
    long long request_started, body_started;
    /// What of `in` counts toward the body budgets (its capacity beyond a head's).
    size_t charged;
    size_t drained;
    /// Whether it counts toward its address's limit (from the time its address is known).
    int counted;
    struct in6_addr address_key;
    char address[64];
    struct connection *previous, *next;
};

struct spark_http_request {
    struct worker *worker;
    /// The connection, or NULL once it has gone (touched by its worker only).
    struct connection *connection;
    /// What the callback reads (valid during the callback): one block, freed after it.
    char *block;
    const char *method, *path, *address;
    size_t header_count, argument_count;
    const char **header_names, **header_values, **argument_names, **argument_values;
    const uint8_t *body;
    size_t body_length;
    /// Fixed before the callback, read by whoever answers.
    int keep_alive, head_only;
    /// The answer, set by spark_http_respond.
    uint8_t *response;
    size_t response_length;
    struct spark_http_request *next;
};

struct worker {
    struct spark_http_server *server;
    pthread_t thread;
    int epoll_fd;
    int wake_fd;
    /// Answers waiting to be written, and whether the eventfd has been written for them.
    pthread_mutex_t lock;
    struct spark_http_request *answered, *answered_last;
    int woken;
    struct connection *connections;
    struct connection *closed;
    int listening;
    /// Out of descriptors (or memory) to accept with: the listening socket is left out of this
    /// worker's epoll until then (ms), or it would be reported ready over and over.
    long long accept_paused_until;
};

struct address_count {
    struct in6_addr address;
    unsigned count;
    /// Bytes of request bodies its connections hold.
    size_t buffered;
    struct address_count *next;
};

struct spark_http_server {
    struct worker *workers;
    unsigned worker_count;
    int listen_fd;
    uint16_t port;
    SSL_CTX *tls;
    spark_http_handler handler;
    spark_http_head_check head_check;
    void *context;
    size_t maximum_body;
    unsigned connection_limit, per_address_limit;
    long long idle_timeout, head_timeout;
    size_t minimum_body_rate;
    /// What request bodies may hold, all clients together and per client address; and what
    /// they hold now (the per-address share is in `addresses`, under its lock).
    size_t body_budget, per_address_body_budget;
    atomic_size_t buffered;
    struct in6_addr *proxies;
    size_t proxy_count;
    atomic_uint connections;
    atomic_int suspended;
    atomic_int closing;
    atomic_int quiescing;
    atomic_uint listeners_left;
    atomic_int stopping;
    pthread_mutex_t addresses_lock;
    struct address_count *addresses[ADDRESS_BUCKETS];
};

static char listen_marker, wake_marker;

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// MARK: - Addresses

static int as_ipv6(const struct sockaddr *address, struct in6_addr *out) {
    if (address->sa_family == AF_INET6) {
        *out = ((const struct sockaddr_in6 *)address)->sin6_addr;
        return 1;
    }
    if (address->sa_family == AF_INET) {
        memset(out, 0, sizeof *out);
        out->s6_addr[10] = 0xFF;
        out->s6_addr[11] = 0xFF;
        memcpy(out->s6_addr + 12, &((const struct sockaddr_in *)address)->sin_addr, 4);
        return 1;
    }
    return 0;
}

int spark_proxy_address(const char *text, struct in6_addr *out) {
    struct in_addr v4;
    if (inet_pton(AF_INET, text, &v4) == 1) {
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr = v4};
        return as_ipv6((const struct sockaddr *)&address, out);
    }
    return inet_pton(AF_INET6, text, out) == 1;
}

/// The connection's address as text and as the key of the per-address counts.
static void set_address(struct connection *connection, const struct sockaddr *address) {
    connection->address[0] = 0;
    memset(&connection->address_key, 0, sizeof connection->address_key);
    as_ipv6(address, &connection->address_key);
    if (address->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, connection->address, sizeof connection->address);
    } else if (address->sa_family == AF_INET6) {
        inet_ntop(
            AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, connection->address, sizeof connection->address);
    }
}

static size_t address_bucket(const struct in6_addr *address) {
    uint32_t hash = 2166136261u;
    for (int i = 0; i < 16; i++) hash = (hash ^ address->s6_addr[i]) * 16777619u;
    return hash % ADDRESS_BUCKETS;
}

/// Counts the connection toward its address: 0 when that address is at its limit.
static int count_address(struct spark_http_server *server, struct connection *connection) {
    size_t bucket = address_bucket(&connection->address_key);
    int admitted = 0;
    pthread_mutex_lock(&server->addresses_lock);
    struct address_count *entry = server->addresses[bucket];
    while (entry && memcmp(&entry->address, &connection->address_key, sizeof entry->address) != 0) entry = entry->next;
    if (!entry) {
        entry = calloc(1, sizeof *entry);
        if (entry) {
            entry->address = connection->address_key;
            entry->next = server->addresses[bucket];
            server->addresses[bucket] = entry;
        }
    }
    if (entry && entry->count < server->per_address_limit) {
        entry->count++;
        admitted = 1;
    }
    pthread_mutex_unlock(&server->addresses_lock);
    connection->counted = admitted;
    return admitted;
}

static void uncount_address(struct spark_http_server *server, struct connection *connection) {
    if (!connection->counted) return;
    size_t bucket = address_bucket(&connection->address_key);
    pthread_mutex_lock(&server->addresses_lock);
    struct address_count **link = &server->addresses[bucket];
    while (*link && memcmp(&(*link)->address, &connection->address_key, sizeof (*link)->address) != 0) link = &(*link)->next;
    if (*link && --(*link)->count == 0) {
        struct address_count *gone = *link;
        *link = gone->next;
        free(gone);
    }
    pthread_mutex_unlock(&server->addresses_lock);
    connection->counted = 0;
}

/// Moves the connection's charge toward the body budgets to what an `in` of `capacity` bytes
/// costs: 1 when done, 0 when the whole server would pass its budget, -1 when its address would.
/// Shrinking always succeeds.
static int charge(struct connection *connection, size_t capacity) {
    struct spark_http_server *server = connection->worker->server;
    size_t wanted = capacity > HTTP_HEAD_MAXIMUM ? capacity - HTTP_HEAD_MAXIMUM : 0;
    if (wanted == connection->charged) return 1;
    size_t bucket = address_bucket(&connection->address_key);
    pthread_mutex_lock(&server->addresses_lock);
    struct address_count *entry = NULL;
    if (connection->counted) {
        entry = server->addresses[bucket];
        while (entry && memcmp(&entry->address, &connection->address_key, sizeof entry->address) != 0) entry = entry->next;
    }
    int result = 1;
    if (wanted > connection->charged) {
        size_t more = wanted - connection->charged;
        if (entry && entry->buffered + more > server->per_address_body_budget) {
            result = -1;
        } else if (atomic_fetch_add(&server->buffered, more) + more > server->body_budget) {
            atomic_fetch_sub(&server->buffered, more);
            result = 0;
        } else if (entry) {
            entry->buffered += more;
        }
    } else {
        size_t less = connection->charged - wanted;
        atomic_fetch_sub(&server->buffered, less);
        if (entry) entry->buffered -= less < entry->buffered ? less : entry->buffered;
    }
    if (result == 1) connection->charged = wanted;
    pthread_mutex_unlock(&server->addresses_lock);
    return result;
}

static int from_proxy(const struct spark_http_server *server, const struct in6_addr *address) {
    for (size_t i = 0; i < server->proxy_count; i++) {
        if (memcmp(&server->proxies[i], address, sizeof *address) == 0) return 1;
    }
    return 0;
}

// MARK: - Answers

static const char *reason(unsigned status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
    }
}

/// The Date header's value, formatted once a second per thread.
static const char *date_now(void) {
    static _Thread_local char text[40];
    static _Thread_local time_t formatted = -1;
    time_t now = time(NULL);
    if (now != formatted) {
        struct tm parts;
        gmtime_r(&now, &parts);
        strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &parts);
        formatted = now;
    }
    return text;
}

/// The headers every answer carries: no answer is cached or sniffed as another type, and over
/// TLS a browser that saw one keeps to HTTPS for this host.
#define ALWAYS_HEADERS "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n"
#define TLS_HEADERS "Strict-Transport-Security: max-age=31536000\r\n"

/// A whole answer's bytes (head and body), malloc'd; NULL when out of memory.
static uint8_t *make_answer(
    unsigned status, const char *content_type, const uint8_t *body, size_t length, const char *const *names,
    const char *const *values, size_t count, int keep_alive, int head_only, int tls, size_t *size) {
    size_t capacity = 256 + sizeof ALWAYS_HEADERS + sizeof TLS_HEADERS + (content_type ? strlen(content_type) : 0) + length;
    for (size_t i = 0; i < count; i++) capacity += strlen(names[i]) + strlen(values[i]) + 4;
    uint8_t *answer = malloc(capacity);
    if (!answer) return NULL;
    int written = snprintf(
        (char *)answer, capacity, "HTTP/1.1 %u %s\r\nDate: %s\r\nContent-Length: %zu\r\n%s%s%s", status % 1000,
        reason(status), date_now(), length, keep_alive ? "" : "Connection: close\r\n", ALWAYS_HEADERS, tls ? TLS_HEADERS : "");
    size_t at = written > 0 ? (size_t)written : 0;
    if (content_type) at += (size_t)snprintf((char *)answer + at, capacity - at, "Content-Type: %s\r\n", content_type);
    for (size_t i = 0; i < count; i++) {
        at += (size_t)snprintf((char *)answer + at, capacity - at, "%s: %s\r\n", names[i], values[i]);
    }
    memcpy(answer + at, "\r\n", 2);
    at += 2;
    if (!head_only && length) {
        memcpy(answer + at, body, length);
        at += length;
    }
    *size = at;
    return answer;
}

// MARK: - Connections

static void close_connection(struct connection *connection) {
    struct worker *worker = connection->worker;
    if (connection->pending) connection->pending->connection = NULL;
    if (connection->tls) SSL_free(connection->tls);
    close(connection->fd);
    charge(connection, 0);
    uncount_address(worker->server, connection);
    atomic_fetch_sub(&worker->server->connections, 1);
    if (connection->previous) connection->previous->next = connection->next;
    else worker->connections = connection->next;
    if (connection->next) connection->next->previous = connection->previous;
    free(connection->in);
    free(connection->out);
    connection->in = connection->out = NULL;
    connection->tls = NULL;
    connection->pending = NULL;
    connection->state = GONE;
    connection->next = worker->closed;
    worker->closed = connection;
}

static void free_closed(struct worker *worker) {
    while (worker->closed) {
        struct connection *next = worker->closed->next;
        free(worker->closed);
        worker->closed = next;
    }
}

/// What an OpenSSL call (read, write, handshake) that returned `result` (≤ 0) waits for: 0 with `*wait` set,
/// -2 when the peer sent close_notify, or -1 when the connection is over (OpenSSL has sent the alert
/// a fatal error calls for).
static int tls_wait(SSL *tls, int result, enum step *wait) {
    int error = SSL_get_error(tls, result);
    if (error == SSL_ERROR_WANT_READ) return *wait = WAIT_READ, 0;
    if (error == SSL_ERROR_WANT_WRITE) return *wait = WAIT_WRITE, 0;
    if (error == SSL_ERROR_ZERO_RETURN) return -2;
    return -1;
}

/// Sends what is left of the answer: 1 when all is sent, 0 when the socket is full, -1 on an error.
static int send_out(struct connection *connection, enum step *wait) {
    while (connection->out_sent < connection->out_length) {
        size_t left = connection->out_length - connection->out_sent;
        const uint8_t *from = connection->out + connection->out_sent;
        long sent;
        if (connection->tls) {
            ERR_clear_error();
            int n = SSL_write(connection->tls, from, left > INT32_MAX ? INT32_MAX : (int)left);
            if (n <= 0) return tls_wait(connection->tls, n, wait);
            sent = n;
        } else {
            sent = send(connection->fd, from, left, MSG_NOSIGNAL);
            if (sent < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return *wait = WAIT_WRITE, 0;
                return -1;
            }
        }
        connection->out_sent += (size_t)sent;
    }
    return 1;
}

/// Makes `answer` (malloc'd, taken) the bytes to write: 0 when there is none (out of memory; the
/// connection must close).
static int set_answer(struct connection *connection, uint8_t *answer, size_t size) {
    free(connection->out);
    connection->out = answer;
    connection->out_length = answer ? size : 0;
    connection->out_sent = 0;
    return answer != NULL;
}

/// Starts writing an answer made here (a refusal, or 100 Continue).
static enum step answer_here(struct connection *connection, unsigned status, const char *body, int close_after) {
    size_t size = 0;
    // A refusal for want of capacity says when to come back.
    const char *retry_name = "Retry-After", *retry_value = "1";
    size_t extra = status == 503 || status == 429;
    uint8_t *answer = status == 100
        ? (uint8_t *)strdup("HTTP/1.1 100 Continue\r\n\r\n")
        : make_answer(
              status, "application/json", (const uint8_t *)body, strlen(body), &retry_name, &retry_value, extra,
              !close_after, 0, connection->tls != NULL, &size);
    if (answer && status == 100) size = strlen((char *)answer);
    if (!set_answer(connection, answer, size)) return CLOSED;
    connection->close_after = close_after;
    connection->state = WRITING;
    return AGAIN;
}

static enum step refuse(struct connection *connection, int refusal) {
    // The rest of the stream cannot be trusted to start a request: the connection closes.
    return answer_here(connection, http_refusal_status((enum http_refusal)refusal), http_refusal_body((enum http_refusal)refusal), 1);
}

/// Grows `in` to hold at least `size` bytes, within the body budgets: 1 when done, 0 when out of
/// memory, or the refusal the budgets give (HTTP_SERVER_BUSY, HTTP_ADDRESS_BUSY), negated.
static int reserve(struct connection *connection, size_t size) {
    if (connection->in_capacity >= size) return 1;
    int charged = charge(connection, size);
    if (charged <= 0) return charged == 0 ? -HTTP_SERVER_BUSY : -HTTP_ADDRESS_BUSY;
    uint8_t *grown = realloc(connection->in, size);
    if (!grown) {
        charge(connection, connection->in_capacity);
        return 0;
    }
    connection->in = grown;
    connection->in_capacity = size;
    return 1;
}

/// Frees `in` (nothing is in it).
static void release_input(struct connection *connection) {
    free(connection->in);
    connection->in = NULL;
    connection->in_capacity = 0;
    charge(connection, 0);
}

/// Reads into `in`: the count read, 0 when nothing more is there now (`*wait` set), -2 when the
/// peer closed TLS with close_notify, -1 when the connection is over (EOF or an error), or
/// -(2 + refusal) when the body budgets refuse `in` more room.
static long receive(struct connection *connection, enum step *wait) {
    if (connection->in_length == connection->in_capacity) {
        // A head fits in HTTP_HEAD_MAXIMUM; only an admitted body (a chunked one: a body with a
        // length has its room already) grows `in` past it, within the budgets.
        size_t limit = connection->body_started
            ? HTTP_HEAD_MAXIMUM + connection->worker->server->maximum_body + READ_SLACK
            : HTTP_HEAD_MAXIMUM;
        if (connection->in_capacity >= limit) return *wait = WAIT_READ, 0;
        size_t capacity = connection->in_capacity ? connection->in_capacity * 2 : HTTP_HEAD_MAXIMUM;
        if (capacity > limit) capacity = limit;
        int reserved = reserve(connection, capacity);
        if (reserved <= 0) return reserved == 0 ? -1 : -2 + reserved;
    }
    if (connection->in_length == 0 && connection->head_length == 0) connection->request_started = now_ms();
    size_t room = connection->in_capacity - connection->in_length;
    uint8_t *to = connection->in + connection->in_length;
    long received;
    for (;;) {
        if (connection->tls) {
            ERR_clear_error();
            int n = SSL_read(connection->tls, to, room > INT32_MAX ? INT32_MAX : (int)room);
            if (n <= 0) return tls_wait(connection->tls, n, wait);
            received = n;
        } else {
            received = recv(connection->fd, to, room, 0);
            if (received < 0 && errno == EINTR) continue;
            if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return *wait = WAIT_READ, 0;
            if (received <= 0) return -1;
        }
        break;
    }
    connection->in_length += (size_t)received;
    connection->deadline = now_ms() + connection->worker->server->idle_timeout;
    return received;
}


/// Builds the handle Swift gets: the request's parts decoded into one block. NULL when out of
/// memory, or with `*malformed` set when the path or an argument decodes to a NUL.
static struct spark_http_request *make_request(
    struct connection *connection, const uint8_t *body, size_t body_length, int *malformed) {
    const uint8_t *bytes = connection->in;
    struct http_head parsed;
    http_parse_head(bytes, connection->head_length, &parsed);
    const struct http_head *head = &parsed;
    size_t arguments = 0;
    if (head->has_query) {
        for (size_t i = 0; i < head->query.length; i++) arguments += bytes[head->query.start + i] == '&';
        arguments++;
    }
    size_t pointers = 2 * head->header_count + 2 * arguments;
    size_t size = head->length + head->query.length + 4 * (head->header_count + arguments) + 16
        + pointers * sizeof(char *) + body_length + 64;
    struct spark_http_request *request = calloc(1, sizeof *request);
    char *block = malloc(size);
    if (!request || !block) {
        free(request);
        free(block);
        return NULL;
    }
    request->block = block;
    const char **table = (const char **)block;
    request->header_names = table;
    request->header_values = table + head->header_count;
    request->argument_names = table + 2 * head->header_count;
    request->argument_values = request->argument_names + arguments;
    char *text = block + pointers * sizeof(char *);
    request->method = text;
    memcpy(text, bytes + head->method.start, head->method.length);
    text[head->method.length] = 0;
    text += head->method.length + 1;
    // The path as sent: routes are matched on it, never on a decoded form that a proxy's rules
    // did not see (`/%6detrics` is not `/metrics`). It is still refused if it decodes to a NUL.
    if (http_unescape((const char *)bytes + head->path.start, head->path.length, text, 0) < 0) goto malformed;
    memcpy(text, bytes + head->path.start, head->path.length);
    text[head->path.length] = 0;
    request->path = text;
    text += head->path.length + 1;
    for (size_t i = 0; i < head->header_count; i++) {
        struct http_span name = head->names[i], value = head->values[i];
        for (size_t c = 0; c < name.length; c++) {
            uint8_t byte = bytes[name.start + c];
            text[c] = (char)(byte >= 'A' && byte <= 'Z' ? byte + 32 : byte);
        }
        text[name.length] = 0;
        request->header_names[i] = text;
        text += name.length + 1;
        memcpy(text, bytes + value.start, value.length);
        text[value.length] = 0;
        request->header_values[i] = text;
        text += value.length + 1;
    }
    request->header_count = head->header_count;
    // The query's arguments: split on '&', each "name=value" or a bare "name" (no value);
    // empty ones skipped.
    const char *query = (const char *)bytes + head->query.start, *end = query + head->query.length;
    while (head->has_query && query <= end) {
        const char *stop = memchr(query, '&', (size_t)(end - query));
        if (!stop) stop = end;
        if (stop > query) {
            const char *equals = memchr(query, '=', (size_t)(stop - query));
            const char *name_end = equals ? equals : stop;
            long length = http_unescape(query, (size_t)(name_end - query), text, 1);
            if (length < 0) goto malformed;
            request->argument_names[request->argument_count] = text;
            text += length + 1;
            request->argument_values[request->argument_count] = NULL;
            if (equals) {
                length = http_unescape(equals + 1, (size_t)(stop - equals - 1), text, 1);
                if (length < 0) goto malformed;
                request->argument_values[request->argument_count] = text;
                text += length + 1;
            }
            request->argument_count++;
        }
        query = stop + 1;
    }
    memcpy(text, connection->address, strlen(connection->address) + 1);
    request->address = text;
    text += strlen(connection->address) + 1;
    if (body_length) memcpy(text, body, body_length);
    request->body = (const uint8_t *)text;
    request->body_length = body_length;
    request->keep_alive = head->keep_alive;
    request->head_only = head->method.length == 4 && memcmp(bytes + head->method.start, "HEAD", 4) == 0;
    return request;
malformed:
    *malformed = 1;
    free(block);
    free(request);
    return NULL;
}

/// Forgets the request just taken from `in` (its `consumed` bytes), keeping what follows.
static void take_input(struct connection *connection, size_t consumed) {
    memmove(connection->in, connection->in + consumed, connection->in_length - consumed);
    connection->in_length -= consumed;
    connection->head_length = 0;
    memset(&connection->chunks, 0, sizeof connection->chunks);
    connection->continue_sent = 0;
    connection->body_started = 0;
    connection->request_started = now_ms();
    if (connection->in_length == 0) release_input(connection);
}

/// Hands the whole request to Swift, or answers it here while the server is closing.
static enum step hand_out(struct connection *connection, const uint8_t *body, size_t body_length, size_t consumed) {
    struct spark_http_server *server = connection->worker->server;
    if (atomic_load(&server->closing)) {
        take_input(connection, consumed);
        return answer_here(
            connection, 503, "{\"code\":\"unavailable\",\"message\":\"the server is shutting down\",\"retryAfter\":1}", 1);
    }
    int malformed = 0;
    struct spark_http_request *request = make_request(connection, body, body_length, &malformed);
    if (malformed) return refuse(connection, HTTP_MALFORMED);
    if (!request) return CLOSED;
    take_input(connection, consumed);
    // Waiting, the connection keeps no buffer: OpenSSL's go too when it holds nothing unread.
    if (connection->tls) SSL_free_buffers(connection->tls);
    request->worker = connection->worker;
    request->connection = connection;
    connection->pending = request;
    connection->state = HANDED_OUT;
    atomic_fetch_add(&server->suspended, 1);
    server->handler(server->context, request);
    // Swift has copied what it needs: the block goes (the handle stays until answered).
    free(request->block);
    request->block = NULL;
    return HANDED;
}

/// Admits the body of the request whose head is in `in` before any of it is read or room is made
/// for it: the head check (route and credential: a refusal is answered at once and the
/// connection closed, the body never read), then the body budgets (room for a body of known
/// length is taken now). Admitted, `body_started` is set; otherwise the refusal's step.
static enum step admit_body(struct connection *connection) {
    struct spark_http_server *server = connection->worker->server;
    if (server->head_check) {
        int malformed = 0;
        struct spark_http_request *request = make_request(connection, NULL, 0, &malformed);
        if (malformed) return refuse(connection, HTTP_MALFORMED);
        if (!request) return CLOSED;
        char body[1024] = {0};
        unsigned status = server->head_check(server->context, request, body, sizeof body);
        free(request->block);
        free(request);
        if (status) {
            body[sizeof body - 1] = 0;
            return answer_here(connection, status, body, 1);
        }
    }
    if (!connection->chunked) {
        int reserved = reserve(connection, connection->head_length + (size_t)connection->content_length);
        if (reserved == 0) return CLOSED;
        if (reserved < 0) return refuse(connection, -reserved);
    }
    connection->body_started = now_ms();
    return AGAIN;
}

/// Takes a whole request from `in` when one is there.
static enum step take_request(struct connection *connection) {
    struct spark_http_server *server = connection->worker->server;
    if (!connection->head_length) {
        struct http_head parsed;
        int result = http_parse_head(connection->in, connection->in_length, &parsed);
        if (result < 0) return refuse(connection, -result);
        if (result == 0) return WAIT_READ;
        if (!parsed.chunked && parsed.content_length > server->maximum_body) return refuse(connection, HTTP_BODY_TOO_LARGE);
        connection->head_length = parsed.length;
        connection->content_length = parsed.content_length;
        connection->chunked = (uint8_t)parsed.chunked;
        connection->expect_continue = (uint8_t)parsed.expect_continue;
    }
    size_t head = connection->head_length;
    if (connection->chunked) {
        size_t consumed = 0;
        int decoded = http_decode_chunks(
            connection->in, &connection->in_length, head, server->maximum_body, &connection->chunks, &consumed);
        if (decoded < 0) return refuse(connection, -decoded);
        if (decoded == 1) return hand_out(connection, connection->in + head, connection->chunks.decoded, consumed);
    } else {
        size_t whole = head + (size_t)connection->content_length;
        if (connection->in_length >= whole)
            return hand_out(connection, connection->in + head, (size_t)connection->content_length, whole);
    }
    // The body is still to come: admitted first (a body that came whole with its head needs no
    // admission: it holds nothing more than it has).
    if (!connection->body_started) {
        enum step refused = admit_body(connection);
        if (!connection->body_started) return refused;
    }
    if (connection->expect_continue && !connection->continue_sent) {
        connection->continue_sent = 1;
        return answer_here(connection, 100, "", 0);
    }
    return WAIT_READ;
}

static void begin_closing(struct connection *connection) {
    if (connection->tls) {
        // close_notify, if the socket takes it now (a closing connection waits for nothing).
        ERR_clear_error();
        SSL_shutdown(connection->tls);
    }
    shutdown(connection->fd, SHUT_WR);
    connection->state = DRAINING;
    connection->drained = 0;
    connection->deadline = now_ms() + DRAIN_TIMEOUT;
}

/// A connection's first state once its client is known: the handshake, which must be done within
/// the head timeout (the idle timer is not reset meanwhile), or reading.
static void start_connection(struct connection *connection) {
    const struct spark_http_server *server = connection->worker->server;
    connection->state = connection->tls ? HANDSHAKE : READING;
    connection->deadline = now_ms() + (connection->tls ? server->head_timeout : server->idle_timeout);
}

static enum step step_proxy_header(struct connection *connection) {
    uint8_t bytes[16 + 1024];
    ssize_t received = recv(connection->fd, bytes, sizeof bytes, MSG_PEEK);
    if (received == 0) return CLOSED;
    if (received < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? WAIT_READ : CLOSED;
    size_t consumed = 0;
    struct sockaddr_storage client;
    socklen_t client_length = 0;
    int parsed = spark_proxy_parse(bytes, (size_t)received, &consumed, &client, &client_length);
    if (parsed < 0) return CLOSED;
    if (parsed == 0) return received == (ssize_t)sizeof bytes ? CLOSED : WAIT_READ;
    // The header is here whole: take exactly it, leaving what follows (HTTP or TLS) unread.
    if (recv(connection->fd, bytes, consumed, 0) != (ssize_t)consumed) return CLOSED;
    if (client_length) set_address(connection, (struct sockaddr *)&client);
    if (!count_address(connection->worker->server, connection)) return CLOSED;
    start_connection(connection);
    return AGAIN;
}

static enum step step_handshake(struct connection *connection) {
    ERR_clear_error();
    int done = SSL_do_handshake(connection->tls);
    if (done == 1) {
        connection->state = READING;
        connection->deadline = now_ms() + connection->worker->server->idle_timeout;
        return AGAIN;
    }
    enum step wait = CLOSED;
    return tls_wait(connection->tls, done, &wait) == 0 ? wait : CLOSED;
}

static enum step step_read(struct connection *connection) {
    // What is already here first (a pipelined request), then the socket.
    if (connection->in_length) {
        enum step step = take_request(connection);
        if (step != WAIT_READ) return step;
    }
    for (;;) {
        enum step wait = WAIT_READ;
        long received = receive(connection, &wait);
        if (received == -2) {
            // The client's close_notify: ours in answer (RFC 8446 section 6.1), then the close.
            begin_closing(connection);
            return AGAIN;
        }
        if (received <= -3) return refuse(connection, (int)(-received - 2));
        if (received < 0) return CLOSED;
        if (received == 0) {
            if (connection->in_length == 0) release_input(connection);
            return wait;
        }
        enum step step = take_request(connection);
        if (step != WAIT_READ) return step;
    }
}

static enum step step_write(struct connection *connection) {
    enum step wait = WAIT_WRITE;
    int sent = send_out(connection, &wait);
    if (sent < 0) return CLOSED;
    if (sent == 0) return wait;
    free(connection->out);
    connection->out = NULL;
    connection->out_length = connection->out_sent = 0;
    connection->deadline = now_ms() + connection->worker->server->idle_timeout;
    if (connection->close_after || connection->peer_closed) {
        begin_closing(connection);
    } else {
        connection->state = READING;
    }
    return AGAIN;
}

static enum step step_drain(struct connection *connection) {
    uint8_t bytes[4096];
    for (;;) {
        ssize_t received = recv(connection->fd, bytes, sizeof bytes, 0);
        if (received == 0) return CLOSED;
        if (received < 0) {
            if (errno == EINTR) continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? WAIT_READ : CLOSED;
        }
        connection->drained += (size_t)received;
        if (connection->drained > DRAIN_MAXIMUM) return CLOSED;
    }
}

/// Runs the connection's state machine until it waits, closing it when it is over.
static void drive(struct connection *connection) {
    for (;;) {
        enum step step;
        switch (connection->state) {
        case PROXY_HEADER: step = step_proxy_header(connection); break;
        case HANDSHAKE: step = step_handshake(connection); break;
        case READING: step = step_read(connection); break;
        case WRITING: step = step_write(connection); break;
        case DRAINING: step = step_drain(connection); break;
        case HANDED_OUT:
        case GONE: return;
        default: step = CLOSED; break;
        }
        if (step == CLOSED) {
            close_connection(connection);
            return;
        }
        // Waiting for the socket (its next edge), or for Swift's answer.
        if (step != AGAIN) return;
    }
}

static void on_event(struct connection *connection, uint32_t events) {
    if (connection->state == GONE) return;
    if (connection->state == HANDED_OUT) {
        if (events & (EPOLLERR | EPOLLHUP)) {
            close_connection(connection);
        } else if (events & EPOLLRDHUP) {
            // The client will send nothing more; its answer is still written, then it closes.
            connection->peer_closed = 1;
        }
        return;
    }
    if ((events & EPOLLERR) || ((events & EPOLLHUP) && !(events & EPOLLIN))) {
        close_connection(connection);
        return;
    }
    drive(connection);
}

// MARK: - Workers

/// Accepts what is waiting: 1 when it stopped for want of descriptors or memory.
static int accept_connections(struct worker *worker) {
    struct spark_http_server *server = worker->server;
    for (int round = 0; round < 64; round++) {
        struct sockaddr_storage peer;
        socklen_t peer_length = sizeof peer;
        int fd = accept4(server->listen_fd, (struct sockaddr *)&peer, &peer_length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM;
        }
        if (atomic_fetch_add(&server->connections, 1) >= server->connection_limit) {
            atomic_fetch_sub(&server->connections, 1);
            close(fd);
            continue;
        }
        struct connection *connection = calloc(1, sizeof *connection);
        if (!connection) {
            atomic_fetch_sub(&server->connections, 1);
            close(fd);
            continue;
        }
        connection->fd = fd;
        connection->worker = worker;
        set_address(connection, (struct sockaddr *)&peer);
        int proxied = server->proxy_count && from_proxy(server, &connection->address_key);
        int yes = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
        if (server->tls) {
            connection->tls = SSL_new(server->tls);
            if (connection->tls) {
                SSL_set_fd(connection->tls, fd);
                SSL_set_accept_state(connection->tls);
                SSL_set_app_data(connection->tls, connection);
            }
        }
        connection->next = worker->connections;
        if (worker->connections) worker->connections->previous = connection;
        worker->connections = connection;
        // Edge-triggered, registered once: a connection is never re-armed, and a waiting one
        // is told only of a reset or FIN.
        struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = connection};
        if ((server->tls && !connection->tls) || epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0
            || (!proxied && !count_address(server, connection))) {
            close_connection(connection);
            continue;
        }
        if (proxied) {
            connection->state = PROXY_HEADER;
            connection->deadline = now_ms() + PROXY_HEADER_TIMEOUT;
        } else {
            start_connection(connection);
        }
    }
    return 0;
}

/// Writes out the answers Swift has queued for this worker.
static void take_answers(struct worker *worker) {
    uint64_t count;
    ssize_t got = read(worker->wake_fd, &count, sizeof count);
    (void)got;
    pthread_mutex_lock(&worker->lock);
    struct spark_http_request *request = worker->answered;
    worker->answered = worker->answered_last = NULL;
    worker->woken = 0;
    pthread_mutex_unlock(&worker->lock);
    while (request) {
        struct spark_http_request *next = request->next;
        struct connection *connection = request->connection;
        atomic_fetch_sub(&worker->server->suspended, 1);
        if (connection) {
            connection->pending = NULL;
            int answered = request->response && set_answer(connection, request->response, request->response_length);
            request->response = NULL;
            connection->close_after = !request->keep_alive;
            connection->state = WRITING;
            connection->deadline = now_ms() + worker->server->idle_timeout;
            if (!answered) {
                close_connection(connection);
            } else {
                drive(connection);
            }
        }
        free(request->response);
        free(request);
        request = next;
    }
}

/// Whether a connection reading a request is too slow: its head not whole `head_timeout` after
/// its first byte, or its body behind the minimum rate (after a grace of `head_timeout`).
static int too_slow(const struct connection *connection, long long now) {
    const struct spark_http_server *server = connection->worker->server;
    if (connection->state != READING || !connection->in_length) return 0;
    if (!connection->head_length) return now - connection->request_started > server->head_timeout;
    if (!connection->body_started || !server->minimum_body_rate) return 0;
    size_t received = connection->in_length - connection->head_length;
    long long allowed = server->head_timeout + (long long)(received * 1000 / server->minimum_body_rate);
    return now - connection->body_started > allowed;
}

/// Closes the connections past their deadline (none while their request is out), and those
/// reading a request too slowly: a byte now and then resets the idle timer, not these.
static void sweep(struct worker *worker) {
    long long now = now_ms();
    struct connection *connection = worker->connections;
    while (connection) {
        struct connection *next = connection->next;
        if (connection->state != HANDED_OUT && (now >= connection->deadline || too_slow(connection, now)))
            close_connection(connection);
        connection = next;
    }
}

static void *worker_main(void *argument) {
    struct worker *worker = argument;
    struct spark_http_server *server = worker->server;
    struct epoll_event events[256];
    long long next_sweep = now_ms() + 1000;
    while (!atomic_load(&server->stopping)) {
        long long now = now_ms();
        long long next = worker->accept_paused_until && worker->accept_paused_until < next_sweep
            ? worker->accept_paused_until
            : next_sweep;
        int timeout = next > now ? (int)(next - now) : 0;
        int count = epoll_wait(worker->epoll_fd, events, 256, timeout);
        for (int i = 0; i < count; i++) {
            void *tag = events[i].data.ptr;
            if (tag == &wake_marker) {
                take_answers(worker);
            } else if (tag == &listen_marker) {
                if (atomic_load(&server->quiescing) || worker->accept_paused_until) continue;
                if (accept_connections(worker)) {
                    epoll_ctl(worker->epoll_fd, EPOLL_CTL_DEL, server->listen_fd, NULL);
                    worker->accept_paused_until = now_ms() + 100;
                }
            } else {
                on_event(tag, events[i].events);
            }
        }
        free_closed(worker);
        if (worker->accept_paused_until && now_ms() >= worker->accept_paused_until) {
            worker->accept_paused_until = 0;
            struct epoll_event listen_event = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker};
            if (worker->listening && !atomic_load(&server->quiescing))
                epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, server->listen_fd, &listen_event);
        }
        if (atomic_load(&server->quiescing) && worker->listening) {
            // The last worker to let go of the listening socket closes it.
            epoll_ctl(worker->epoll_fd, EPOLL_CTL_DEL, server->listen_fd, NULL);
            worker->listening = 0;
            if (atomic_fetch_sub(&server->listeners_left, 1) == 1) close(server->listen_fd);
        }
        if (now_ms() >= next_sweep) {
            sweep(worker);
            free_closed(worker);
            next_sweep = now_ms() + 1000;
        }
    }
    return NULL;
}

static void wake(struct worker *worker) {
    uint64_t one = 1;
    ssize_t written = write(worker->wake_fd, &one, sizeof one);
    (void)written;
}

// MARK: - TLS

/// The TLS 1.2 suites offered, strongest first (Mozilla's "intermediate" list).
#define TLS12_CIPHERS                                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"                  \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

static int choose_http11(
    SSL *tls, const unsigned char **out, unsigned char *out_length, const unsigned char *in, unsigned int in_length,
    void *argument) {
    (void)tls;
    (void)argument;
    for (unsigned i = 0; i < in_length;) {
        unsigned length = in[i];
        if (i + 1 + length > in_length) break;
        if (length == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *out_length = 8;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + length;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *make_tls(const char *certificate_pem, const char *key_pem) {
    SSL_CTX *context = SSL_CTX_new(TLS_server_method());
    if (!context) return NULL;
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
    // TLS 1.2: forward-secret key exchange and AEAD suites only (no CBC, so no Lucky13; no RSA
    // key transport; no SHA-1 MACs), for ECDSA and RSA certificates alike. TLS 1.3's suites are
    // all AEADs; OpenSSL's defaults stand.
    if (SSL_CTX_set_cipher_list(context, TLS12_CIPHERS) != 1) {
        SSL_CTX_free(context);
        return NULL;
    }
    // An idle connection keeps no record buffers (and a parked one is told to free them:
    // SSL_free_buffers in hand_out); no session is kept here, and none resumed.
    SSL_CTX_set_mode(
        context, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    // No TLS 1.3 tickets either: nothing would resume with them (a device that reconnects makes a
    // full handshake), and each is a record written after the handshake.
    SSL_CTX_set_num_tickets(context, 0);
    SSL_CTX_set_alpn_select_cb(context, choose_http11, NULL);
    BIO *certificates = BIO_new_mem_buf(certificate_pem, -1);
    BIO *keys = BIO_new_mem_buf(key_pem, -1);
    X509 *leaf = certificates ? PEM_read_bio_X509(certificates, NULL, NULL, NULL) : NULL;
    EVP_PKEY *key = keys ? PEM_read_bio_PrivateKey(keys, NULL, NULL, NULL) : NULL;
    int ok = leaf && key && SSL_CTX_use_certificate(context, leaf) == 1 && SSL_CTX_use_PrivateKey(context, key) == 1
        && SSL_CTX_check_private_key(context) == 1;
    // The rest of the chain, in order.
    for (X509 *next; ok && (next = PEM_read_bio_X509(certificates, NULL, NULL, NULL));) {
        if (SSL_CTX_add0_chain_cert(context, next) != 1) {
            X509_free(next);
            ok = 0;
        }
    }
    ERR_clear_error();
    X509_free(leaf);
    EVP_PKEY_free(key);
    BIO_free(certificates);
    BIO_free(keys);
    if (!ok) {
        SSL_CTX_free(context);
        return NULL;
    }
    return context;
}

// MARK: - The server

static void free_server(struct spark_http_server *server) {
    for (unsigned i = 0; i < server->worker_count; i++) {
        struct worker *worker = &server->workers[i];
        while (worker->connections) close_connection(worker->connections);
        free_closed(worker);
        if (worker->epoll_fd >= 0) close(worker->epoll_fd);
        if (worker->wake_fd >= 0) close(worker->wake_fd);
        pthread_mutex_destroy(&worker->lock);
    }
    for (size_t b = 0; b < ADDRESS_BUCKETS; b++) {
        while (server->addresses[b]) {
            struct address_count *next = server->addresses[b]->next;
            free(server->addresses[b]);
            server->addresses[b] = next;
        }
    }
    pthread_mutex_destroy(&server->addresses_lock);
    if (server->listen_fd >= 0 && atomic_load(&server->listeners_left) > 0) close(server->listen_fd);
    if (server->tls) SSL_CTX_free(server->tls);
    free(server->workers);
    free(server->proxies);
    free(server);
}

spark_http_server *spark_http_start(
    const spark_http_options *options, spark_http_handler handler, void *context, char *error, size_t error_size) {
    // A write to a connection the client has reset must not end the process.
    signal(SIGPIPE, SIG_IGN);
    struct spark_http_server *server = calloc(1, sizeof *server);
    if (!server) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    server->handler = handler;
    server->head_check = options->head_check;
    server->context = context;
    server->head_timeout = (long long)(options->head_timeout ? options->head_timeout : 10) * 1000;
    server->minimum_body_rate = options->minimum_body_rate;
    server->body_budget = options->body_budget ? options->body_budget : SIZE_MAX;
    server->per_address_body_budget = options->per_address_body_budget ? options->per_address_body_budget : SIZE_MAX;
    server->maximum_body = options->maximum_body;
    server->connection_limit = options->connection_limit;
    server->per_address_limit = options->per_address_limit;
    server->idle_timeout = (long long)options->idle_timeout * 1000;
    server->listen_fd = -1;
    pthread_mutex_init(&server->addresses_lock, NULL);

    struct sockaddr_storage storage;
    memset(&storage, 0, sizeof storage);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
    socklen_t storage_length;
    if (inet_pton(AF_INET, options->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(options->port);
        storage_length = sizeof *v4;
    } else if (inet_pton(AF_INET6, options->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(options->port);
        storage_length = sizeof *v6;
    } else {
        snprintf(error, error_size, "'%s' is not an IP address to listen on", options->host);
        free_server(server);
        return NULL;
    }
    if (options->proxy_address_count) {
        server->proxies = calloc(options->proxy_address_count, sizeof *server->proxies);
        if (!server->proxies) {
            snprintf(error, error_size, "out of memory");
            free_server(server);
            return NULL;
        }
        for (size_t i = 0; i < options->proxy_address_count; i++) {
            if (!spark_proxy_address(options->proxy_addresses[i], &server->proxies[i])) {
                snprintf(error, error_size, "'%s' is not a proxy's IP address", options->proxy_addresses[i]);
                free_server(server);
                return NULL;
            }
        }
        server->proxy_count = options->proxy_address_count;
    }
    if (options->certificate_pem && options->key_pem) {
        server->tls = make_tls(options->certificate_pem, options->key_pem);
        if (!server->tls) {
            snprintf(error, error_size, "the certificate or its key is not usable (PEM, a key matching the certificate)");
            free_server(server);
            return NULL;
        }
    }
    int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int yes = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0
        || bind(fd, (struct sockaddr *)&storage, storage_length) != 0 || listen(fd, 4096) != 0) {
        snprintf(
            error, error_size, "cannot listen on %s port %u (in use or not permitted)", options->host,
            (unsigned)options->port);
        if (fd >= 0) close(fd);
        free_server(server);
        return NULL;
    }
    server->listen_fd = fd;
    struct sockaddr_storage bound;
    socklen_t bound_length = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &bound_length);
    server->port = ntohs(
        bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port : ((struct sockaddr_in6 *)&bound)->sin6_port);

    unsigned count = options->threads ? options->threads : 1;
    server->workers = calloc(count, sizeof *server->workers);
    if (!server->workers) {
        snprintf(error, error_size, "out of memory");
        free_server(server);
        return NULL;
    }
    for (unsigned i = 0; i < count; i++) {
        struct worker *worker = &server->workers[i];
        worker->server = server;
        pthread_mutex_init(&worker->lock, NULL);
        worker->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        worker->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        server->worker_count = i + 1;
        struct epoll_event listen_event = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_marker};
        struct epoll_event wake_event = {.events = EPOLLIN, .data.ptr = &wake_marker};
        if (worker->epoll_fd < 0 || worker->wake_fd < 0
            || epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, fd, &listen_event) != 0
            || epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, worker->wake_fd, &wake_event) != 0) {
            snprintf(error, error_size, "cannot set up the server's event loops");
            free_server(server);
            return NULL;
        }
        worker->listening = 1;
    }
    atomic_store(&server->listeners_left, count);
    for (unsigned i = 0; i < count; i++) {
        if (pthread_create(&server->workers[i].thread, NULL, worker_main, &server->workers[i]) != 0) {
            atomic_store(&server->stopping, 1);
            for (unsigned j = 0; j < i; j++) {
                wake(&server->workers[j]);
                pthread_join(server->workers[j].thread, NULL);
            }
            snprintf(error, error_size, "cannot start the server's threads");
            free_server(server);
            return NULL;
        }
    }
    return server;
}

uint16_t spark_http_port(const spark_http_server *server) { return server->port; }

void spark_http_quiesce(spark_http_server *server) {
    if (atomic_exchange(&server->quiescing, 1)) return;
    for (unsigned i = 0; i < server->worker_count; i++) wake(&server->workers[i]);
}

void spark_http_close(spark_http_server *server) { atomic_store(&server->closing, 1); }

unsigned spark_http_suspended(const spark_http_server *server) {
    int count = atomic_load(&server->suspended);
    return count > 0 ? (unsigned)count : 0;
}

unsigned spark_http_connections(const spark_http_server *server) { return atomic_load(&server->connections); }

void spark_http_stop(spark_http_server *server) {
    atomic_store(&server->stopping, 1);
    for (unsigned i = 0; i < server->worker_count; i++) wake(&server->workers[i]);
    for (unsigned i = 0; i < server->worker_count; i++) pthread_join(server->workers[i].thread, NULL);
    free_server(server);
}

// MARK: - Requests

const char *spark_http_method(const spark_http_request *request) { return request->method; }
const char *spark_http_path(const spark_http_request *request) { return request->path; }
const char *spark_http_client_address(const spark_http_request *request) { return request->address; }

const char *spark_http_header(const spark_http_request *request, const char *name) {
    for (size_t i = 0; i < request->header_count; i++) {
        if (strcasecmp(request->header_names[i], name) == 0) return request->header_values[i];
    }
    return NULL;
}

size_t spark_http_argument_count(const spark_http_request *request) { return request->argument_count; }

const char *spark_http_argument_name(const spark_http_request *request, size_t index) {
    return index < request->argument_count ? request->argument_names[index] : NULL;
}

const char *spark_http_argument_value(const spark_http_request *request, size_t index) {
    return index < request->argument_count ? request->argument_values[index] : NULL;
}

const uint8_t *spark_http_body(const spark_http_request *request, size_t *length) {
    *length = request->body_length;
    return request->body;
}

void spark_http_respond(
    spark_http_request *request, unsigned status, const char *content_type, const uint8_t *body, size_t length,
    const char *const *header_names, const char *const *header_values, size_t header_count) {
    // Out of memory: the connection is closed without an answer (response NULL).
    request->response = make_answer(
        status, content_type, body, length, header_names, header_values, header_count, request->keep_alive,
        request->head_only, request->worker->server->tls != NULL, &request->response_length);
    struct worker *worker = request->worker;
    pthread_mutex_lock(&worker->lock);
    request->next = NULL;
    if (worker->answered_last) worker->answered_last->next = request;
    else worker->answered = request;
    worker->answered_last = request;
    int must_wake = !worker->woken;
    worker->woken = 1;
    pthread_mutex_unlock(&worker->lock);
    if (must_wake) wake(worker);
}

// MARK: - Parsing without a socket

int spark_http_parse(const uint8_t *bytes, size_t length, size_t maximum_body, size_t *consumed, size_t *body_length) {
    struct http_head head;
    int parsed = http_parse_head(bytes, length, &head);
    if (parsed <= 0) return parsed < 0 ? -(int)http_refusal_status((enum http_refusal)-parsed) : 0;
    uint8_t *copy = malloc(length ? length : 1);
    if (!copy) return 0;
    memcpy(copy, bytes, length);
    int result;
    if (head.chunked) {
        struct http_chunks chunks = {0};
        size_t copy_length = length;
        size_t next = 0;
        int decoded = http_decode_chunks(copy, &copy_length, head.length, maximum_body, &chunks, &next);
        result = decoded < 0 ? -(int)http_refusal_status((enum http_refusal)-decoded) : decoded;
        if (decoded == 1) {
            // The copy lost the framing; what follows the body is as long as in the input.
            *consumed = length - (copy_length - next);
            *body_length = chunks.decoded;
        }
    } else if (head.content_length > maximum_body) {
        result = -413;
    } else if (length - head.length >= head.content_length) {
        *consumed = head.length + (size_t)head.content_length;
        *body_length = (size_t)head.content_length;
        result = 1;
    } else {
        result = 0;
    }
    // The path and the arguments decode (or are refused) as the server decodes them.
    char *text = malloc(length + 1);
    if (result == 1 && text) {
        if (http_unescape((const char *)bytes + head.path.start, head.path.length, text, 0) < 0) result = -400;
        if (http_unescape((const char *)bytes + head.query.start, head.query.length, text, 1) < 0) result = -400;
    }
    free(text);
    free(copy);
    return result;
}
