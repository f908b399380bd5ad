// The parts of the HTTP/1.1 server (CSparkHTTP.h) shared by its files, by role:
// - CSparkHTTPTransport.c: how bytes travel, in the clear or through OpenSSL (one interface);
// - CSparkHTTPConnection.c: a connection's state machine, its answers and its timers;
// - CSparkHTTP.c: the workers (epoll, accepting, Swift's answers) and the server's lifecycle;
// - CSparkHTTPAddresses.c: the per-address accounting (connection counts, body budgets), which
//   calls into no other file;
// - CSparkHTTPParse.c: the framing, pure functions over bytes (the fuzzer's too).
// Every function one file gives another carries the spark_http_ prefix.
#ifndef C_SPARK_HTTP_INTERNAL_H
#define C_SPARK_HTTP_INTERNAL_H
#define _GNU_SOURCE
#include "CSparkHTTP.h"
#include "CSparkHTTPError.h"
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
struct connection;

/// A worker's timers: its connections by `due`, earliest first.
struct spark_http_timers {
    struct connection **items;
    size_t count, capacity;
};

/// How a connection's bytes travel: in the clear, or through OpenSSL (which seals and opens every
/// record, sends the alerts and answers KeyUpdate). The state machine calls these and never asks
/// which it has.
struct spark_http_transport {
    /// Completes the handshake: 1 when done, 0 while it waits (`*wait` set), -1 when it failed.
    int (*handshake)(struct connection *connection, enum step *wait);
    /// Reads into `to`: the count, 0 when nothing is there now (`*wait` set), -1 when the
    /// connection is over (EOF or an error), -2 when the peer closed TLS with close_notify.
    long (*receive)(struct connection *connection, uint8_t *to, size_t room, enum step *wait);
    /// Writes from `from`: the count, 0 when the socket is full (`*wait` set), -1 on an error.
    long (*send)(struct connection *connection, const uint8_t *from, size_t length, enum step *wait);
    /// Says the connection is closing (TLS's close_notify, if the socket takes it now).
    void (*close_notify)(struct connection *connection);
    /// Lets go of buffers while the connection waits for its answer.
    void (*park)(struct connection *connection);
    /// Frees what the transport holds for the connection.
    void (*release)(struct connection *connection);
    /// Whether it is TLS (answers then carry Strict-Transport-Security).
    int secure;
};

struct connection {
    int fd;
    enum connection_state state;
    struct worker *worker;
    /// How its bytes travel (in the clear, or through OpenSSL), and OpenSSL's connection when
    /// that is TLS.
    const struct spark_http_transport *transport;
    SSL *tls;
    /// Received bytes not yet taken by a request (NULL when none).
    uint8_t *in;
    size_t in_length, in_capacity;
    /// The answer being written.
    uint8_t *out;
    size_t out_length, out_sent;
    /// After the answer is written: close (1) or read the next request (0).
    int close_after;
    /// The request being read: its head's length (0 until it is whole) and parsed head, its body's
    /// framing, and a chunked body's state.
    struct spark_http_framing framing;
    int continue_sent;
    /// The request handed out and not yet answered.
    struct spark_http_request *pending;
    /// The client sent FIN while its request was out: closed once answered.
    int peer_closed;
    /// When it is closed unless something happens (ms, monotonic).
    long long deadline;
    /// When its timer next fires (the earliest of the deadline and the head's and body's times),
    /// and its place in its worker's timers (0: not scheduled, else the index + 1).
    long long due;
    size_t timer_slot;
    /// When the request being read began (its first byte), and when its body was admitted
    /// (0: not yet): the head has `head_timeout` in all, the body a minimum rate.
    long long request_started, body_started;
    /// What of `in` counts toward the body budgets (its capacity beyond a head's).
    size_t charged;
    size_t drained;
    /// Whether it counts toward its address's limit (from the time its address is known).
    int counted;
    /// The client's address (as IPv6, IPv4 mapped), and the key of its per-address counts: the
    /// address itself for IPv4, its first `ipv6_prefix` bits for IPv6.
    struct in6_addr address_key, limit_key;
    /// The key the head check charged the body to as well (the token's user), if any: a
    /// 16-byte digest in ff55::/16, a multicast prefix no client address has, so it shares the
    /// address table without meeting an address.
    struct in6_addr charge_key;
    int has_charge_key;
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
    /// The connections with a time to act on, earliest first (a binary heap on `due`).
    struct spark_http_timers timers;
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
    /// The bits of an IPv6 address the per-address limits key on (1 to 128).
    unsigned ipv6_prefix;
    atomic_uint connections;
    atomic_int suspended;
    atomic_int closing;
    atomic_int quiescing;
    atomic_uint listeners_left;
    atomic_int stopping;
    pthread_mutex_t addresses_lock;
    struct address_count *addresses[ADDRESS_BUCKETS];
};


static inline long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// CSparkHTTPTransport.c
extern const struct spark_http_transport spark_http_plain_transport, spark_http_tls_transport;
/// Gives `connection` a TLS connection of `context` on its socket: 0 when out of memory.
int spark_http_attach_tls(struct connection *connection, SSL_CTX *context);
/// The server's TLS context for this certificate chain and key; NULL when they are not usable.
SSL_CTX *spark_http_make_tls(const char *certificate_pem, const char *key_pem);

// CSparkHTTPConnection.c
/// An answer's bytes (status line, headers, body): malloc'd, NULL when out of memory.
uint8_t *spark_http_make_answer(
    unsigned status, const char *content_type, const uint8_t *body, size_t length, const char *const *names,
    const char *const *values, size_t count, int keep_alive, int head_only, int secure, size_t *size);
int spark_http_set_answer(struct connection *connection, uint8_t *answer, size_t size);
void spark_http_close_connection(struct connection *connection);
void spark_http_free_closed(struct worker *worker);
void spark_http_start_connection(struct connection *connection);
void spark_http_drive(struct connection *connection);
void spark_http_on_event(struct connection *connection, uint32_t events);
/// Puts the connection in its worker's timers at its next time (out of them while its request is
/// out): 0 when out of memory.
int spark_http_schedule(struct connection *connection);
/// Closes the worker's connections whose time came: past their deadline, or reading too slowly.
void spark_http_expire(struct worker *worker, long long now);
/// When the worker's next timer fires (-1: none).
long long spark_http_next_due(const struct worker *worker);

// CSparkHTTPAddresses.c
int spark_http_from_proxy(const struct spark_http_server *server, const struct in6_addr *address);
void spark_http_set_address(struct connection *connection, const struct sockaddr *address);
void spark_http_limit_key(const struct in6_addr *address, unsigned bits, struct in6_addr *out);
void spark_http_set_charge_key(struct connection *connection, const char *key);
int spark_http_count_address(struct spark_http_server *server, struct connection *connection);
void spark_http_uncount_address(struct spark_http_server *server, struct connection *connection);
int spark_http_charge(struct connection *connection, size_t capacity);

#endif
