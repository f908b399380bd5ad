// HTTP/1.1 request framing (RFC 9112), private to the server (CSparkHTTPConnection.c): the head, the query,
// percent-decoding and chunked bodies. Pure functions over bytes, so the fuzzer and the tests
// reach them without a socket (spark_http_parse in CSparkHTTP.h).
#ifndef C_SPARK_HTTP_PARSE_H
#define C_SPARK_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

enum {
    /// The longest head (request line, headers, blank line) accepted.
    HTTP_HEAD_MAXIMUM = 8192,
    /// The most header fields accepted.
    HTTP_MAXIMUM_HEADERS = 64,
    /// The most query parameters (the wire's operations take at most four) and the longest
    /// query string (theirs are a few hundred bytes at most).
    HTTP_MAXIMUM_QUERY_PARAMETERS = 64,
    HTTP_MAXIMUM_QUERY_LENGTH = 4096,
};

/// Why a request is refused; each has its status and body (http_refusal).
enum http_refusal {
    HTTP_MALFORMED = 1,
    HTTP_HEAD_TOO_LARGE,
    HTTP_LINE_TOO_LONG,
    HTTP_QUERY_TOO_LONG,
    HTTP_TOO_MANY_PARAMETERS,
    HTTP_VERSION_UNSUPPORTED,
    HTTP_CODING_UNSUPPORTED,
    HTTP_NO_HOST,
    HTTP_BODY_TOO_LARGE,
    HTTP_BAD_CHUNKS,
    /// The body budgets (the server's and the client address's) hold no room for this body now.
    HTTP_SERVER_BUSY,
    HTTP_ADDRESS_BUSY,
};

/// A refusal's status and JSON body ({code, message}).
unsigned spark_http_refusal_status(enum http_refusal refusal);
const char *spark_http_refusal_body(enum http_refusal refusal);

/// Where a part of the head lies in its bytes.
struct http_span {
    uint16_t start;
    uint16_t length;
};

/// A parsed head. Spans index the bytes it was parsed from (at most HTTP_HEAD_MAXIMUM of them).
struct http_head {
    /// Bytes through the blank line that ends the head.
    size_t length;
    /// Bytes of whole lines parsed so far (0 before the request line): a later call resumes there.
    size_t parsed;
    struct http_span method;
    /// The target's path (before any '?'), still percent-encoded.
    struct http_span path;
    /// The query after '?', still encoded; `has_query` tells an empty one from none.
    struct http_span query;
    int has_query;
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    int minor_version;
    size_t header_count;
    struct http_span names[HTTP_MAXIMUM_HEADERS];
    struct http_span values[HTTP_MAXIMUM_HEADERS];
    /// The body's framing: chunked, or `content_length` bytes (0 when neither is given).
    int chunked;
    uint64_t content_length;
    /// `Expect: 100-continue` was sent.
    int expect_continue;
    /// The connection stays open after this request's answer.
    int keep_alive;
};

/// Parses the head at the start of `bytes`: 0 when more bytes are needed, 1 when it is whole
/// (`head` filled), or -refusal. Never reads past `length`. `head` is zeroed before a request's
/// first call; after a 0, a call with more bytes (the same ones first) resumes where the last
/// stopped, so each line of a head that arrives in pieces is parsed once.
int spark_http_parse_head(const uint8_t *bytes, size_t length, struct http_head *head);

/// Percent-decodes `length` bytes of `text` into `out` (room for `length` + 1), '+' as a space
/// when `plus_is_space`; a '%' not followed by two hex digits stays as it is. Returns the decoded
/// length (NUL-terminated), or -1 when it would decode to a NUL byte.
long spark_http_unescape(const char *text, size_t length, char *out, int plus_is_space);

/// The state of a chunked body being decoded in place.
struct http_chunks {
    int state;
    uint64_t remaining;
    /// Decoded bytes so far, from the body's start.
    size_t decoded;
    size_t trailer_bytes;
};

/// Decodes what has arrived of a chunked body. The body starts at `base` in `bytes`, which holds
/// `*length` bytes: decoded data is moved down to `base`, and what is not yet decoded follows it
/// (`*length` shrinks by the framing taken). Returns 1 when the body is whole (`*consumed` is
/// where the next request starts), 0 when more bytes are needed, or -refusal.
int spark_http_decode_chunks(
    uint8_t *bytes, size_t *length, size_t base, uint64_t maximum, struct http_chunks *state, size_t *consumed);

/// A request being framed: zeroed for each request, kept between reads.
struct spark_http_framing {
    /// The head's length, 0 until it is whole.
    size_t head_length;
    /// The body's framing, from the head.
    uint64_t content_length;
    uint8_t chunked, expect_continue;
    /// A chunked body's state (decoded in place).
    struct http_chunks chunks;
    /// The head as parsed, whole once `head_length` is set: the request is made from it, never
    /// parsed again. Made at the request's first read and freed by spark_http_framing_reset, so
    /// a connection between requests (or waiting for its answer) holds none.
    struct http_head *head;
};

/// Frees what `framing` holds and zeroes it for the next request.
void spark_http_framing_reset(struct spark_http_framing *framing);

/// Frames the request at the start of `bytes` (`*length` of them; a chunked body is decoded in
/// place, which shortens `*length`), the one framing the server and the fuzzer use: 1 when it is
/// whole (its body `*body_length` bytes after the head, `*consumed` bytes of `bytes` taken), 0
/// when more bytes are needed (`framing->head_length` is set once the head is whole), or
/// -refusal. A body over `maximum_body` is refused from its head; no memory for the head is
/// -HTTP_SERVER_BUSY.
int spark_http_frame(
    struct spark_http_framing *framing, uint8_t *bytes, size_t *length, size_t maximum_body, size_t *body_length,
    size_t *consumed);

#endif
