#ifndef C_SPARK_HTTP_H
#define C_SPARK_HTTP_H

#include <stddef.h>
#include <stdint.h>

/// spark-domaind's HTTP/1.1 server (CSparkHTTP.c): worker threads on epoll, keep-alive, TLS by
/// OpenSSL, whole requests handed to one callback. The callback runs on a server thread and must
/// not block: it copies what it needs of the request (the accessors below are valid during the
/// callback only) and answers later, from any thread, with `spark_http_respond` (the connection
/// waits meanwhile, so a long-poll holds no thread and no buffer). Every request handed out is
/// answered exactly once; answering frees it.

typedef struct spark_http_server spark_http_server;
typedef struct spark_http_request spark_http_request;

/// Called once per complete request (headers and body within the size cap).
typedef void (*spark_http_handler)(void *context, spark_http_request *request);

/// Called on a server thread once a request's head is whole and its body is still to come,
/// before any of the body is read or room is made for it (the request's accessors work; its
/// body is empty). Returns 0 to read the body, or a status with its JSON body written into `body`
/// (`body_size` bytes, NUL-terminated) to refuse the request: the refusal is sent at once
/// (instead of `100 Continue` when the client asked for one) and the connection closed without
/// the body being read. Returning 0, it may write into `body` a key (NUL-terminated, such as the
/// token's user) whose requests share one per-address body budget wherever they come from: a
/// body is admitted only while both its address and its key have room. It must not block.
typedef unsigned (*spark_http_head_check)(
    void *context, const spark_http_request *request, char *body, size_t body_size);

typedef struct {
    /// The address to listen on ("127.0.0.1", "0.0.0.0", "::1", "::"); port 0 picks a free one.
    const char *host;
    uint16_t port;
    /// PEM certificate chain and key; both NULL for plain HTTP.
    const char *certificate_pem;
    const char *key_pem;
    /// Worker threads (epoll each).
    unsigned threads;
    /// Open connections at most, all clients together and per client address.
    unsigned connection_limit;
    unsigned per_address_limit;
    /// Seconds a connection may stay idle (no byte received) before it is closed.
    unsigned idle_timeout;
    /// The largest request body accepted; a larger one is answered 413 without being read.
    size_t maximum_body;
    /// Seconds a request's head may take from its first byte (and a TLS handshake from the
    /// connection's start), however it trickles in; 0: 10.
    unsigned head_timeout;
    /// The slowest a body may arrive once admitted, in bytes a second averaged from its start,
    /// after a grace of `head_timeout`; 0: no minimum.
    size_t minimum_body_rate;
    /// The bytes request bodies may hold in the server's buffers, all clients together and per
    /// client address (0: no cap): past either a body is refused (503 or 429, Retry-After)
    /// before it is read.
    size_t body_budget;
    size_t per_address_body_budget;
    /// The check of a head before its body is read (NULL: none).
    spark_http_head_check head_check;
    /// The addresses ("192.0.2.1", "::1") of proxies that open each connection with a PROXY
    /// protocol v2 header (haproxy's `send-proxy-v2`): a connection from one of them must begin
    /// with a valid header within 5 seconds or is closed, and the client address the header
    /// names is the connection's (for the per-address limits and the request's address). From
    /// any other address a header is not read (the bytes are taken as HTTP).
    const char *const *proxy_addresses;
    size_t proxy_address_count;
    /// The per-address limits (connections, body budget) count an IPv6 client by its first
    /// `ipv6_prefix` bits (1 to 128; 0: 64, the subnet any IPv6 host can pick addresses from).
    /// IPv4 clients count by their whole address.
    unsigned ipv6_prefix;
} spark_http_options;

/// Starts serving; NULL with a message in `error` when it cannot.
spark_http_server *spark_http_start(
    const spark_http_options *options, spark_http_handler handler, void *context, char *error, size_t error_size);
/// The port actually bound.
uint16_t spark_http_port(const spark_http_server *server);
/// Stops accepting new connections (requests on open connections still arrive).
void spark_http_quiesce(spark_http_server *server);
/// From now on requests are answered 503 at once instead of being handed out (shutdown).
void spark_http_close(spark_http_server *server);
/// Requests handed out whose answer the server has not taken back yet (answered or not).
unsigned spark_http_suspended(const spark_http_server *server);
/// Stops the server and closes its connections. Call it only once `spark_http_suspended` is 0
/// after `spark_http_close` (a request still out would be answered into freed memory).
void spark_http_stop(spark_http_server *server);
/// Connections open now.
unsigned spark_http_connections(const spark_http_server *server);

/// The request's method, its path (without the query, as sent: not percent-decoded) and a header (by name,
/// case-insensitive; the first when repeated; NULL when absent). Valid during the callback.
const char *spark_http_method(const spark_http_request *request);
const char *spark_http_path(const spark_http_request *request);
const char *spark_http_header(const spark_http_request *request, const char *name);
/// The query's arguments in order (names may repeat), decoded ('+' a space): the value is NULL
/// for a bare name without '='. Valid during the callback.
size_t spark_http_argument_count(const spark_http_request *request);
const char *spark_http_argument_name(const spark_http_request *request, size_t index);
const char *spark_http_argument_value(const spark_http_request *request, size_t index);
/// The body received (a chunked one decoded). Valid during the callback.
const uint8_t *spark_http_body(const spark_http_request *request, size_t *length);
/// The client's address as text ("192.0.2.1", "::1").
const char *spark_http_client_address(const spark_http_request *request);

/// Answers the request (from any thread) and frees it. `header_names`/`header_values` hold
/// `header_count` extra headers.
void spark_http_respond(
    spark_http_request *request, unsigned status, const char *content_type, const uint8_t *body, size_t length,
    const char *const *header_names, const char *const *header_values, size_t header_count);

/// Frames one request at the start of `bytes` as the server does (head, body, path and query
/// decoding), without a socket: 1 when it is whole (`*consumed` its length, `*body_length` its
/// body's), 0 when more bytes are needed, or minus the status it is refused with (400, 413, 414,
/// 431; never a 5xx). For the fuzzer and the tests.
int spark_http_parse(const uint8_t *bytes, size_t length, size_t maximum_body, size_t *consumed, size_t *body_length);

/// Frames the request at the start of `bytes` as the server does when they arrive `piece` bytes
/// at a time (each read resuming the framing where the last stopped, the head parsed once): the
/// same answers as spark_http_parse's framing, without its path and query decoding. Stops at the
/// first read that makes the request whole or refused. For the fuzzer and the tests.
int spark_http_parse_in_pieces(
    const uint8_t *bytes, size_t length, size_t maximum_body, size_t piece, size_t *consumed, size_t *body_length);

/// Parses a PROXY protocol v2 header (haproxy's PROXY protocol, section 2.2) at the start of
/// `bytes`. Returns 1 when it is whole: `*consumed` is its length and `address` (at least 64
/// bytes) the client's address as text, or empty for a LOCAL command (a proxy's own health
/// check) or an unspecified family, which keep the connection's address. Returns 0 when more
/// bytes are needed, and -1 when the bytes are not a valid header (then the connection is
/// closed). Headers longer than 1,040 bytes are refused.
int spark_proxy_header_parse(const uint8_t *bytes, size_t length, size_t *consumed, char *address, size_t address_size);

/// A private CA (valid `ca_days`) and a server certificate signed by it (valid `server_days`),
/// ECDSA P-256 with SHA-256, PEM-encoded into malloc'd strings the caller frees. `names` holds
/// `name_count` DNS names or IP addresses for the server certificate's subjectAltName. 1 on
/// success, 0 with a message in `error`.
int spark_tls_make_certificates(
    const char *common_name, const char *const *names, size_t name_count, unsigned ca_days, unsigned server_days,
    char **ca_certificate, char **ca_key, char **server_certificate, char **server_key, char *error, size_t error_size);

/// A new key and server certificate (valid `days`, the same subject and subjectAltName) in place
/// of `old_certificate`, signed by the CA, when the CA issued the old one and it ends within
/// `renew_within_days` (or has ended): 1 with the PEM in malloc'd strings the caller frees; 0
/// when nothing is due (or the certificate is not this CA's); -1 with a message in `error`.
int spark_tls_renew_certificate(
    const char *ca_certificate, const char *ca_key, const char *old_certificate, unsigned days, unsigned renew_within_days,
    char **server_certificate, char **server_key, char *error, size_t error_size);

#endif
