// The HTTP/1.1 server of spark-domaind: worker threads on epoll, TLS by OpenSSL, one request at
// a time per connection.
//
// Each worker owns its connections: only its thread touches them. A connection is a small state
// machine (CSparkHTTPConnection.c) driven by spark_http_drive whenever its socket is ready; its
// bytes travel through a transport (CSparkHTTPTransport.c, plain or OpenSSL). A whole request is handed to Swift's callback; the connection
// then waits, watched only for a reset, and holds no buffer: OpenSSL's are released
// (SSL_MODE_RELEASE_BUFFERS) and ours freed, so an idle long-poll costs its connection, its TLS
// state and the request's handle. Swift answers from any thread: the answer is queued to the
// connection's worker and its eventfd written once for the whole queue, and the worker writes it
// out in constant time (no walk over the waiting connections).
//
// This file: the workers (accepting, epoll, Swift's answers) and the server's lifecycle. The
// per-address accounting is CSparkHTTPAddresses.c's.
#include "CSparkHTTPInternal.h"

static char listen_marker, wake_marker;

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
        spark_http_set_address(connection, (struct sockaddr *)&peer);
        int proxied = server->proxy_count && spark_http_from_proxy(server, &connection->address_key);
        int yes = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
        connection->transport = &spark_http_plain_transport;
        int attached = !server->tls || spark_http_attach_tls(connection, server->tls);
        connection->next = worker->connections;
        if (worker->connections) worker->connections->previous = connection;
        worker->connections = connection;
        // Edge-triggered, registered once: a connection is never re-armed, and a waiting one
        // is told only of a reset or FIN.
        struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = connection};
        if (!attached || epoll_ctl(worker->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0
            || (!proxied && !spark_http_count_address(server, connection))) {
            spark_http_close_connection(connection);
            continue;
        }
        if (proxied) {
            connection->state = PROXY_HEADER;
            connection->deadline = now_ms() + PROXY_HEADER_TIMEOUT;
        } else {
            spark_http_start_connection(connection);
        }
        // Its deadline counts from now, whether or not its socket says anything.
        if (!spark_http_schedule(connection)) spark_http_close_connection(connection);
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
            int answered = request->response && spark_http_set_answer(connection, request->response, request->response_length);
            request->response = NULL;
            connection->close_after = !request->keep_alive;
            connection->state = WRITING;
            connection->deadline = now_ms() + worker->server->idle_timeout;
            if (!answered) {
                spark_http_close_connection(connection);
            } else {
                spark_http_drive(connection);
            }
        }
        free(request->response);
        free(request);
        request = next;
    }
}

static void *worker_main(void *argument) {
    struct worker *worker = argument;
    struct spark_http_server *server = worker->server;
    struct epoll_event events[256];
    while (!atomic_load(&server->stopping)) {
        long long now = now_ms();
        // Asleep until the earliest timer, or the end of a pause in accepting (a stop or a
        // quiesce wakes it through its eventfd).
        long long next = spark_http_next_due(worker);
        if (worker->accept_paused_until && (next < 0 || worker->accept_paused_until < next))
            next = worker->accept_paused_until;
        int timeout = next < 0 ? -1 : next > now ? (int)(next - now) : 0;
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
                spark_http_on_event(tag, events[i].events);
            }
        }
        spark_http_free_closed(worker);
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
        spark_http_expire(worker, now_ms());
        spark_http_free_closed(worker);
    }
    return NULL;
}

static void wake(struct worker *worker) {
    uint64_t one = 1;
    ssize_t written = write(worker->wake_fd, &one, sizeof one);
    (void)written;
}

// MARK: - The server

static void free_server(struct spark_http_server *server) {
    for (unsigned i = 0; i < server->worker_count; i++) {
        struct worker *worker = &server->workers[i];
        while (worker->connections) spark_http_close_connection(worker->connections);
        spark_http_free_closed(worker);
        free(worker->timers.items);
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
        spark_set_error(error, error_size, "out of memory");
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
    server->ipv6_prefix = options->ipv6_prefix && options->ipv6_prefix <= 128 ? options->ipv6_prefix : 64;
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
        spark_set_error(error, error_size, "'%s' is not an IP address to listen on", options->host);
        free_server(server);
        return NULL;
    }
    if (options->proxy_address_count) {
        server->proxies = calloc(options->proxy_address_count, sizeof *server->proxies);
        if (!server->proxies) {
            spark_set_error(error, error_size, "out of memory");
            free_server(server);
            return NULL;
        }
        for (size_t i = 0; i < options->proxy_address_count; i++) {
            if (!spark_proxy_address(options->proxy_addresses[i], &server->proxies[i])) {
                spark_set_error(error, error_size, "'%s' is not a proxy's IP address", options->proxy_addresses[i]);
                free_server(server);
                return NULL;
            }
        }
        server->proxy_count = options->proxy_address_count;
    }
    if (options->certificate_pem && options->key_pem) {
        server->tls = spark_http_make_tls(options->certificate_pem, options->key_pem);
        if (!server->tls) {
            spark_set_error(error, error_size, "the certificate or its key is not usable (PEM, a key matching the certificate)");
            free_server(server);
            return NULL;
        }
    }
    int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int yes = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0
        || bind(fd, (struct sockaddr *)&storage, storage_length) != 0 || listen(fd, 4096) != 0) {
        spark_set_error(
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
        spark_set_error(error, error_size, "out of memory");
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
            spark_set_error(error, error_size, "cannot set up the server's event loops");
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
            spark_set_error(error, error_size, "cannot start the server's threads");
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
    request->response = spark_http_make_answer(
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
