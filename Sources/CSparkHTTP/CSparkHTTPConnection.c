// A connection of the HTTP/1.1 server: its state machine (proxy header, handshake, reading,
// handed out, writing, draining), driven by spark_http_drive whenever its socket is ready; the
// answers it writes; and its worker's timers, a heap ordered by when each connection must next be
// looked at (its idle deadline, or when its head or body would be too slow), so a worker wakes for
// the earliest alone and never walks every connection. Only its worker's thread touches it.
#include "CSparkHTTPInternal.h"

#include <stdarg.h>

static void timers_remove(struct spark_http_timers *timers, struct connection *connection);

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

/// Appends a formatted piece at `*at` of a buffer of `capacity` bytes; 0 when it did not fit
/// whole (nothing past the buffer is written, and `*at` does not move).
__attribute__((format(printf, 4, 5))) static int append_formatted(
    uint8_t *buffer, size_t capacity, size_t *at, const char *format, ...) {
    if (*at >= capacity) return 0;
    va_list arguments;
    va_start(arguments, format);
    int written = vsnprintf((char *)buffer + *at, capacity - *at, format, arguments);
    va_end(arguments);
    if (written < 0 || (size_t)written >= capacity - *at) return 0;
    *at += (size_t)written;
    return 1;
}

/// A whole answer's bytes (head and body), malloc'd; NULL when out of memory (or, which the
/// capacity rules out, when the head would not fit: never a truncated or overrun answer).
uint8_t *spark_http_make_answer(
    unsigned status, const char *content_type, const uint8_t *body, size_t length, const char *const *names,
    const char *const *values, size_t count, int keep_alive, int head_only, int tls, size_t *size) {
    size_t capacity = 256 + sizeof ALWAYS_HEADERS + sizeof TLS_HEADERS + (content_type ? strlen(content_type) : 0) + length;
    for (size_t i = 0; i < count; i++) capacity += strlen(names[i]) + strlen(values[i]) + 4;
    uint8_t *answer = malloc(capacity);
    if (!answer) return NULL;
    size_t at = 0;
    int fits = append_formatted(
        answer, capacity, &at, "HTTP/1.1 %u %s\r\nDate: %s\r\nContent-Length: %zu\r\n%s%s%s", status % 1000,
        reason(status), date_now(), length, keep_alive ? "" : "Connection: close\r\n", ALWAYS_HEADERS, tls ? TLS_HEADERS : "");
    if (fits && content_type) fits = append_formatted(answer, capacity, &at, "Content-Type: %s\r\n", content_type);
    for (size_t i = 0; fits && i < count; i++) fits = append_formatted(answer, capacity, &at, "%s: %s\r\n", names[i], values[i]);
    if (!fits || capacity - at < 2 + (head_only ? 0 : length)) {
        free(answer);
        return NULL;
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

void spark_http_close_connection(struct connection *connection) {
    struct worker *worker = connection->worker;
    if (connection->pending) connection->pending->connection = NULL;
    connection->transport->release(connection);
    timers_remove(&worker->timers, connection);
    close(connection->fd);
    spark_http_charge(connection, 0);
    spark_http_uncount_address(worker->server, connection);
    atomic_fetch_sub(&worker->server->connections, 1);
    if (connection->previous) connection->previous->next = connection->next;
    else worker->connections = connection->next;
    if (connection->next) connection->next->previous = connection->previous;
    free(connection->in);
    free(connection->out);
    spark_http_framing_reset(&connection->framing);
    connection->in = connection->out = NULL;
    connection->pending = NULL;
    connection->state = GONE;
    connection->next = worker->closed;
    worker->closed = connection;
}

void spark_http_free_closed(struct worker *worker) {
    while (worker->closed) {
        struct connection *next = worker->closed->next;
        free(worker->closed);
        worker->closed = next;
    }
}

/// Sends what is left of the answer: 1 when all is sent, 0 when the socket is full, -1 on an error.
static int send_out(struct connection *connection, enum step *wait) {
    while (connection->out_sent < connection->out_length) {
        long sent = connection->transport->send(
            connection, connection->out + connection->out_sent, connection->out_length - connection->out_sent, wait);
        if (sent <= 0) return (int)sent;
        connection->out_sent += (size_t)sent;
    }
    return 1;
}

/// Makes `answer` (malloc'd, taken) the bytes to write: 0 when there is none (out of memory; the
/// connection must close).
int spark_http_set_answer(struct connection *connection, uint8_t *answer, size_t size) {
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
        : spark_http_make_answer(
              status, "application/json", (const uint8_t *)body, strlen(body), &retry_name, &retry_value, extra,
              !close_after, 0, connection->transport->secure, &size);
    if (answer && status == 100) size = strlen((char *)answer);
    if (!spark_http_set_answer(connection, answer, size)) return CLOSED;
    connection->close_after = close_after;
    connection->state = WRITING;
    return AGAIN;
}

static enum step refuse(struct connection *connection, int refusal) {
    // The rest of the stream cannot be trusted to start a request: the connection closes.
    return answer_here(connection, spark_http_refusal_status((enum http_refusal)refusal), spark_http_refusal_body((enum http_refusal)refusal), 1);
}

/// Grows `in` to hold at least `size` bytes, within the body budgets: 1 when done, 0 when out of
/// memory, or the refusal the budgets give (HTTP_SERVER_BUSY, HTTP_ADDRESS_BUSY), negated.
static int reserve(struct connection *connection, size_t size) {
    if (connection->in_capacity >= size) return 1;
    int charged = spark_http_charge(connection, size);
    if (charged <= 0) return charged == 0 ? -HTTP_SERVER_BUSY : -HTTP_ADDRESS_BUSY;
    uint8_t *grown = realloc(connection->in, size);
    if (!grown) {
        spark_http_charge(connection, connection->in_capacity);
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
    spark_http_charge(connection, 0);
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
    if (connection->in_length == 0 && connection->framing.head_length == 0) connection->request_started = now_ms();
    size_t room = connection->in_capacity - connection->in_length;
    uint8_t *to = connection->in + connection->in_length;
    long received = connection->transport->receive(connection, to, room, wait);
    if (received <= 0) return received;
    connection->in_length += (size_t)received;
    connection->deadline = now_ms() + connection->worker->server->idle_timeout;
    return received;
}


/// Builds the handle Swift gets: the request's parts decoded into one block. NULL when out of
/// memory, or with `*malformed` set when the path or an argument decodes to a NUL.
static struct spark_http_request *make_request(
    struct connection *connection, const uint8_t *body, size_t body_length, int *malformed) {
    const uint8_t *bytes = connection->in;
    // The head framing parsed (once, as its bytes came): only its spans are read here.
    const struct http_head *head = connection->framing.head;
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
    if (spark_http_unescape((const char *)bytes + head->path.start, head->path.length, text, 0) < 0) goto malformed;
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
            long length = spark_http_unescape(query, (size_t)(name_end - query), text, 1);
            if (length < 0) goto malformed;
            request->argument_names[request->argument_count] = text;
            text += length + 1;
            request->argument_values[request->argument_count] = NULL;
            if (equals) {
                length = spark_http_unescape(equals + 1, (size_t)(stop - equals - 1), text, 1);
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
    spark_http_framing_reset(&connection->framing);
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
    // Waiting, the connection keeps no buffer: the transport's go too.
    connection->transport->park(connection);
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
        body[sizeof body - 1] = 0;
        if (status) return answer_here(connection, status, body, 1);
        spark_http_set_charge_key(connection, body[0] ? body : NULL);
    }
    if (!connection->framing.chunked) {
        int reserved = reserve(connection, connection->framing.head_length + (size_t)connection->framing.content_length);
        if (reserved == 0) return CLOSED;
        if (reserved < 0) return refuse(connection, -reserved);
    }
    connection->body_started = now_ms();
    return AGAIN;
}

/// Takes a whole request from `in` when one is there.
static enum step take_request(struct connection *connection) {
    struct spark_http_server *server = connection->worker->server;
    size_t body_length = 0, consumed = 0;
    int framed = spark_http_frame(
        &connection->framing, connection->in, &connection->in_length, server->maximum_body, &body_length, &consumed);
    if (framed < 0) return refuse(connection, -framed);
    if (framed == 1) return hand_out(connection, connection->in + connection->framing.head_length, body_length, consumed);
    if (!connection->framing.head_length) return WAIT_READ;
    // The body is still to come: admitted first (a body that came whole with its head needs no
    // admission: it holds nothing more than it has).
    if (!connection->body_started) {
        enum step refused = admit_body(connection);
        if (!connection->body_started) return refused;
    }
    if (connection->framing.expect_continue && !connection->continue_sent) {
        connection->continue_sent = 1;
        return answer_here(connection, 100, "", 0);
    }
    return WAIT_READ;
}

static void begin_closing(struct connection *connection) {
    // close_notify, if the socket takes it now (a closing connection waits for nothing).
    connection->transport->close_notify(connection);
    shutdown(connection->fd, SHUT_WR);
    connection->state = DRAINING;
    connection->drained = 0;
    connection->deadline = now_ms() + DRAIN_TIMEOUT;
}

/// A connection's first state once its client is known: the handshake, which must be done within
/// the head timeout (the idle timer is not reset meanwhile), or reading.
void spark_http_start_connection(struct connection *connection) {
    const struct spark_http_server *server = connection->worker->server;
    connection->state = HANDSHAKE;
    connection->deadline = now_ms() + (connection->transport->secure ? server->head_timeout : server->idle_timeout);
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
    if (client_length) spark_http_set_address(connection, (struct sockaddr *)&client);
    if (!spark_http_count_address(connection->worker->server, connection)) return CLOSED;
    spark_http_start_connection(connection);
    return AGAIN;
}

static enum step step_handshake(struct connection *connection) {
    enum step wait = CLOSED;
    int done = connection->transport->handshake(connection, &wait);
    if (done == 1) {
        connection->state = READING;
        connection->deadline = now_ms() + connection->worker->server->idle_timeout;
        return AGAIN;
    }
    return done == 0 ? wait : CLOSED;
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
void spark_http_drive(struct connection *connection) {
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
            spark_http_close_connection(connection);
            return;
        }
        // Waiting for the socket (its next edge), or for Swift's answer; its timer follows.
        if (step != AGAIN) {
            if (!spark_http_schedule(connection)) spark_http_close_connection(connection);
            return;
        }
    }
}

void spark_http_on_event(struct connection *connection, uint32_t events) {
    if (connection->state == GONE) return;
    if (connection->state == HANDED_OUT) {
        if (events & (EPOLLERR | EPOLLHUP)) {
            spark_http_close_connection(connection);
        } else if (events & EPOLLRDHUP) {
            // The client will send nothing more; its answer is still written, then it closes.
            connection->peer_closed = 1;
        }
        return;
    }
    if ((events & EPOLLERR) || ((events & EPOLLHUP) && !(events & EPOLLIN))) {
        spark_http_close_connection(connection);
        return;
    }
    spark_http_drive(connection);
}

// MARK: - Timers

/// When a connection reading a request becomes too slow (0: it cannot, now): its head not whole
/// `head_timeout` after its first byte, or its body behind the minimum rate (after a grace of
/// `head_timeout`). A byte now and then resets the idle deadline, not these.
static long long slow_at(const struct connection *connection) {
    const struct spark_http_server *server = connection->worker->server;
    if (connection->state != READING || !connection->in_length) return 0;
    if (!connection->framing.head_length) return connection->request_started + server->head_timeout + 1;
    if (!connection->body_started || !server->minimum_body_rate) return 0;
    size_t received = connection->in_length - connection->framing.head_length;
    return connection->body_started + server->head_timeout + (long long)(received * 1000 / server->minimum_body_rate) + 1;
}

/// When the connection must next be looked at: its deadline, or sooner the time it would become
/// too slow (0: never, while its request is out).
static long long due_time(const struct connection *connection) {
    if (connection->state == HANDED_OUT || connection->state == GONE) return 0;
    long long slow = slow_at(connection);
    return slow && slow < connection->deadline ? slow : connection->deadline;
}

static void timers_swap(struct spark_http_timers *timers, size_t a, size_t b) {
    struct connection *held = timers->items[a];
    timers->items[a] = timers->items[b];
    timers->items[b] = held;
    timers->items[a]->timer_slot = a + 1;
    timers->items[b]->timer_slot = b + 1;
}

static void timers_up(struct spark_http_timers *timers, size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (timers->items[parent]->due <= timers->items[i]->due) return;
        timers_swap(timers, parent, i);
        i = parent;
    }
}

static void timers_down(struct spark_http_timers *timers, size_t i) {
    for (;;) {
        size_t left = 2 * i + 1, right = left + 1, least = i;
        if (left < timers->count && timers->items[left]->due < timers->items[least]->due) least = left;
        if (right < timers->count && timers->items[right]->due < timers->items[least]->due) least = right;
        if (least == i) return;
        timers_swap(timers, i, least);
        i = least;
    }
}

static void timers_remove(struct spark_http_timers *timers, struct connection *connection) {
    if (!connection->timer_slot) return;
    size_t i = connection->timer_slot - 1, last = --timers->count;
    connection->timer_slot = 0;
    if (i == last) return;
    timers->items[i] = timers->items[last];
    timers->items[i]->timer_slot = i + 1;
    timers_down(timers, i);
    timers_up(timers, i);
}

int spark_http_schedule(struct connection *connection) {
    struct spark_http_timers *timers = &connection->worker->timers;
    long long due = due_time(connection);
    if (!due) {
        timers_remove(timers, connection);
        return 1;
    }
    if (connection->timer_slot) {
        size_t i = connection->timer_slot - 1;
        long long before = connection->due;
        connection->due = due;
        if (due < before) timers_up(timers, i);
        else timers_down(timers, i);
        return 1;
    }
    if (timers->count == timers->capacity) {
        size_t capacity = timers->capacity ? timers->capacity * 2 : 64;
        struct connection **grown = realloc(timers->items, capacity * sizeof *grown);
        if (!grown) return 0;
        timers->items = grown;
        timers->capacity = capacity;
    }
    connection->due = due;
    timers->items[timers->count] = connection;
    connection->timer_slot = ++timers->count;
    timers_up(timers, timers->count - 1);
    return 1;
}

void spark_http_expire(struct worker *worker, long long now) {
    struct spark_http_timers *timers = &worker->timers;
    while (timers->count && timers->items[0]->due <= now) {
        struct connection *connection = timers->items[0];
        long long slow = slow_at(connection);
        // Past its deadline, or too slow: closed. Otherwise its time moved on since it was set.
        if (now >= connection->deadline || (slow && now >= slow)) {
            spark_http_close_connection(connection);
        } else if (!spark_http_schedule(connection) || connection->due <= now) {
            // Not rescheduled, or still due (which the times above rule out): closed rather than
            // looked at again and again.
            spark_http_close_connection(connection);
        }
    }
}

long long spark_http_next_due(const struct worker *worker) {
    return worker->timers.count ? worker->timers.items[0]->due : -1;
}
