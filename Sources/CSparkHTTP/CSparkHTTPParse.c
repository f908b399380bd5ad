// HTTP/1.1 request framing (RFC 9112): strict where leniency lets two parsers disagree about
// where a request ends (Content-Length and Transfer-Encoding together, a Content-Length that is
// not one number, obsolete line folding, whitespace before a colon, bare CR or LF), and every
// length bounded before it is used.
#include "CSparkHTTP.h"
#include "CSparkHTTPParse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

unsigned spark_http_refusal_status(enum http_refusal refusal) {
    switch (refusal) {
    case HTTP_HEAD_TOO_LARGE: return 431;
    case HTTP_LINE_TOO_LONG:
    case HTTP_QUERY_TOO_LONG: return 414;
    case HTTP_BODY_TOO_LARGE: return 413;
    // Capacity, not the client's input: the whole server's (503) or its address's share (429),
    // each with Retry-After.
    case HTTP_SERVER_BUSY: return 503;
    case HTTP_ADDRESS_BUSY: return 429;
    // 505 and 501 are what RFC 9110 and 9112 suggest; a client's input is never answered 5xx
    // here (a 5xx says the server failed), so these are 400 with their reason.
    case HTTP_VERSION_UNSUPPORTED:
    case HTTP_CODING_UNSUPPORTED:
    case HTTP_MALFORMED:
    case HTTP_TOO_MANY_PARAMETERS:
    case HTTP_NO_HOST:
    case HTTP_BAD_CHUNKS: return 400;
    }
    return 400;
}

const char *spark_http_refusal_body(enum http_refusal refusal) {
    switch (refusal) {
    case HTTP_HEAD_TOO_LARGE:
        return "{\"code\":\"invalidRequest\",\"message\":\"the request's head is too large (at most 8192 bytes, 64 "
               "fields)\"}";
    case HTTP_LINE_TOO_LONG:
        return "{\"code\":\"invalidRequest\",\"message\":\"the request line is too long (at most 8192 bytes)\"}";
    case HTTP_QUERY_TOO_LONG:
        return "{\"code\":\"invalidRequest\",\"message\":\"the query string is too long (at most 4096 bytes)\"}";
    case HTTP_TOO_MANY_PARAMETERS:
        return "{\"code\":\"invalidRequest\",\"message\":\"too many query parameters (at most 64)\"}";
    case HTTP_VERSION_UNSUPPORTED:
        return "{\"code\":\"invalidRequest\",\"message\":\"only HTTP/1.1 and HTTP/1.0 are served\"}";
    case HTTP_CODING_UNSUPPORTED:
        return "{\"code\":\"invalidRequest\",\"message\":\"the only transfer coding accepted is chunked\"}";
    case HTTP_NO_HOST:
        return "{\"code\":\"invalidRequest\",\"message\":\"an HTTP/1.1 request needs one Host header\"}";
    case HTTP_BODY_TOO_LARGE:
        return "{\"code\":\"tooLarge\",\"message\":\"the request body is larger than this server accepts\"}";
    case HTTP_BAD_CHUNKS:
        return "{\"code\":\"invalidRequest\",\"message\":\"the chunked body is malformed\"}";
    case HTTP_SERVER_BUSY:
        return "{\"code\":\"unavailable\",\"message\":\"the server holds as many request bodies as it may; try again "
               "shortly\",\"retryAfter\":1}";
    case HTTP_ADDRESS_BUSY:
        return "{\"code\":\"tooManyAttempts\",\"message\":\"this address's requests hold as many bodies as one address "
               "may; try again shortly\",\"retryAfter\":1}";
    case HTTP_MALFORMED: break;
    }
    return "{\"code\":\"invalidRequest\",\"message\":\"the request is not well-formed HTTP/1.1\"}";
}

/// RFC 9110's tchar.
static int is_token(uint8_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/// A field value's byte: visible, space, tab or obs-text.
static int is_value(uint8_t c) { return c == '\t' || (c >= 0x20 && c != 0x7F); }

static int span_is(const uint8_t *bytes, struct http_span span, const char *text) {
    size_t length = strlen(text);
    return span.length == length && strncasecmp((const char *)bytes + span.start, text, length) == 0;
}

/// Whether the comma-separated list in `span` holds `token` (case-insensitive).
static int list_has(const uint8_t *bytes, struct http_span span, const char *token) {
    size_t length = strlen(token);
    const uint8_t *p = bytes + span.start, *end = p + span.length;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
        const uint8_t *item = p;
        while (p < end && *p != ',') p++;
        const uint8_t *last = p;
        while (last > item && (last[-1] == ' ' || last[-1] == '\t')) last--;
        if ((size_t)(last - item) == length && strncasecmp((const char *)item, token, length) == 0) return 1;
    }
    return 0;
}

/// The end of the line starting at `from` (the index of its CR), or `length` when no CRLF has
/// arrived yet; -1 for a CR not followed by LF, or an LF alone.
static long line_end(const uint8_t *bytes, size_t length, size_t from) {
    for (size_t i = from; i < length; i++) {
        if (bytes[i] == '\n') return -1;
        if (bytes[i] == '\r') {
            if (i + 1 == length) return (long)length;
            return bytes[i + 1] == '\n' ? (long)i : -1;
        }
    }
    return (long)length;
}

static int parse_request_line(const uint8_t *bytes, size_t end, struct http_head *head) {
    size_t i = 0;
    while (i < end && is_token(bytes[i])) i++;
    if (i == 0 || i >= end || bytes[i] != ' ') return -HTTP_MALFORMED;
    head->method = (struct http_span){0, (uint16_t)i};
    size_t target = ++i;
    while (i < end && bytes[i] > 0x20 && bytes[i] < 0x7F) i++;
    if (i == target || i >= end || bytes[i] != ' ' || bytes[target] != '/') return -HTTP_MALFORMED;
    size_t target_end = i++;
    const uint8_t *question = memchr(bytes + target, '?', target_end - target);
    size_t path_end = question ? (size_t)(question - bytes) : target_end;
    head->path = (struct http_span){(uint16_t)target, (uint16_t)(path_end - target)};
    head->has_query = question != NULL;
    head->query = question ? (struct http_span){(uint16_t)(path_end + 1), (uint16_t)(target_end - path_end - 1)}
                           : (struct http_span){(uint16_t)target_end, 0};
    if (end - i != 8 || memcmp(bytes + i, "HTTP/", 5) != 0) return -HTTP_MALFORMED;
    uint8_t major = bytes[i + 5], dot = bytes[i + 6], minor = bytes[i + 7];
    if (major < '0' || major > '9' || dot != '.' || minor < '0' || minor > '9') return -HTTP_MALFORMED;
    if (major != '1' || minor > '1') return -HTTP_VERSION_UNSUPPORTED;
    head->minor_version = minor - '0';
    if (head->query.length > HTTP_MAXIMUM_QUERY_LENGTH) return -HTTP_QUERY_TOO_LONG;
    size_t separators = 0;
    for (size_t q = head->query.start; q < head->query.start + head->query.length; q++) {
        if (bytes[q] == '&' || bytes[q] == ';') separators++;
    }
    if (separators >= HTTP_MAXIMUM_QUERY_PARAMETERS) return -HTTP_TOO_MANY_PARAMETERS;
    return 1;
}

/// Reads what the server acts on from the fields: the body's framing, Expect and Connection.
static int interpret_fields(const uint8_t *bytes, struct http_head *head) {
    int has_length = 0, transfer_codings = 0, hosts = 0, close = 0, keep_alive = 0;
    for (size_t f = 0; f < head->header_count; f++) {
        struct http_span name = head->names[f], value = head->values[f];
        if (span_is(bytes, name, "content-length")) {
            if (value.length == 0 || value.length > 18) return value.length ? -HTTP_BODY_TOO_LARGE : -HTTP_MALFORMED;
            uint64_t number = 0;
            for (size_t i = 0; i < value.length; i++) {
                uint8_t c = bytes[value.start + i];
                if (c < '0' || c > '9') return -HTTP_MALFORMED;
                number = number * 10 + (uint64_t)(c - '0');
            }
            if (has_length && number != head->content_length) return -HTTP_MALFORMED;
            has_length = 1;
            head->content_length = number;
        } else if (span_is(bytes, name, "transfer-encoding")) {
            transfer_codings++;
            if (!span_is(bytes, value, "chunked")) return -HTTP_CODING_UNSUPPORTED;
        } else if (span_is(bytes, name, "host")) {
            hosts++;
        } else if (span_is(bytes, name, "connection")) {
            close |= list_has(bytes, value, "close");
            keep_alive |= list_has(bytes, value, "keep-alive");
        } else if (span_is(bytes, name, "expect")) {
            head->expect_continue = span_is(bytes, value, "100-continue");
        }
    }
    // Both framings, or chunked twice, is how requests are smuggled past a proxy: refused.
    if (transfer_codings > 1 || (transfer_codings && has_length)) return -HTTP_MALFORMED;
    head->chunked = transfer_codings == 1;
    if (head->chunked && head->minor_version == 0) return -HTTP_CODING_UNSUPPORTED;
    if (hosts > 1 || (head->minor_version == 1 && hosts == 0)) return -HTTP_NO_HOST;
    head->keep_alive = !close && (head->minor_version == 1 || keep_alive);
    return 1;
}

int spark_http_parse_head(const uint8_t *bytes, size_t length, struct http_head *head) {
    size_t window = length < HTTP_HEAD_MAXIMUM ? length : HTTP_HEAD_MAXIMUM;
    long end;
    if (head->parsed == 0) {
        // The request line first; once it is whole, the reads that follow resume after it.
        end = line_end(bytes, window, 0);
        if (end < 0) return -HTTP_MALFORMED;
        if ((size_t)end == window) return window == HTTP_HEAD_MAXIMUM ? -HTTP_LINE_TOO_LONG : 0;
        int result = parse_request_line(bytes, (size_t)end, head);
        if (result < 0) return result;
        head->parsed = (size_t)end + 2;
    }
    // Each whole header line is parsed once: `parsed` moves past it, and a line not yet whole is
    // read again when more bytes come (as picohttpparser's `last_len` spares a rescan).
    size_t at = head->parsed;
    for (;;) {
        end = line_end(bytes, window, at);
        if (end < 0) return -HTTP_MALFORMED;
        if ((size_t)end == window) return window == HTTP_HEAD_MAXIMUM ? -HTTP_HEAD_TOO_LARGE : 0;
        size_t line = at, stop = (size_t)end;
        at = stop + 2;
        if (line == stop) break;
        if (head->header_count == HTTP_MAXIMUM_HEADERS) return -HTTP_HEAD_TOO_LARGE;
        size_t i = line;
        while (i < stop && is_token(bytes[i])) i++;
        // No name, whitespace before the colon, or a folded line (starting with whitespace).
        if (i == line || i == stop || bytes[i] != ':') return -HTTP_MALFORMED;
        struct http_span name = {(uint16_t)line, (uint16_t)(i - line)};
        i++;
        while (i < stop && (bytes[i] == ' ' || bytes[i] == '\t')) i++;
        size_t value_end = stop;
        while (value_end > i && (bytes[value_end - 1] == ' ' || bytes[value_end - 1] == '\t')) value_end--;
        for (size_t v = i; v < value_end; v++) {
            if (!is_value(bytes[v])) return -HTTP_MALFORMED;
        }
        head->names[head->header_count] = name;
        head->values[head->header_count] = (struct http_span){(uint16_t)i, (uint16_t)(value_end - i)};
        head->header_count++;
        head->parsed = at;
    }
    head->length = at;
    return interpret_fields(bytes, head);
}

static int hex_value(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long spark_http_unescape(const char *text, size_t length, char *out, int plus_is_space) {
    size_t o = 0;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (c == '%' && i + 2 < length) {
            int high = hex_value((uint8_t)text[i + 1]), low = hex_value((uint8_t)text[i + 2]);
            if (high >= 0 && low >= 0) {
                c = (char)(high << 4 | low);
                if (c == 0) return -1;
                i += 2;
            }
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        out[o++] = c;
    }
    out[o] = 0;
    return (long)o;
}

enum { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, CHUNK_TRAILERS };
enum { CHUNK_LINE_MAXIMUM = 1024, TRAILERS_MAXIMUM = 8192 };

/// The CRLF ending the line at `from`: its index, -2 when not yet here (and the line is not
/// over its cap), -1 when malformed.
static long chunk_line(const uint8_t *bytes, size_t length, size_t from, size_t cap) {
    size_t limit = length - from > cap ? from + cap : length;
    long end = line_end(bytes, limit, from);
    if (end < 0) return -1;
    if ((size_t)end == limit) return limit == length ? -2 : -1;
    return end;
}

/// Whether bytes[from..<to] hold a control byte other than a tab (a NUL, say).
static int has_control(const uint8_t *bytes, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) {
        if ((bytes[i] < 0x20 && bytes[i] != '\t') || bytes[i] == 0x7f) return 1;
    }
    return 0;
}

int spark_http_decode_chunks(
    uint8_t *bytes, size_t *length, size_t base, uint64_t maximum, struct http_chunks *state, size_t *consumed) {
    size_t p = base + state->decoded;
    int result = 0;
    while (result == 0) {
        if (state->state == CHUNK_SIZE) {
            long end = chunk_line(bytes, *length, p, CHUNK_LINE_MAXIMUM);
            if (end == -2) break;
            if (end < 0) return -HTTP_BAD_CHUNKS;
            uint64_t size = 0;
            size_t i = p, digits = 0;
            for (; i < (size_t)end && hex_value(bytes[i]) >= 0; i++, digits++) {
                if (digits == 16) return -HTTP_BODY_TOO_LARGE;
                size = size << 4 | (uint64_t)hex_value(bytes[i]);
            }
            // Digits, then nothing or extensions (RFC 9112 section 7.1.1: optional whitespace, then
            // ";name=value", not interpreted, with no control byte but a tab).
            while (i < (size_t)end && (bytes[i] == ' ' || bytes[i] == '\t')) i++;
            if (digits == 0 || (i < (size_t)end && bytes[i] != ';') || has_control(bytes, i, (size_t)end))
                return -HTTP_BAD_CHUNKS;
            if (size > maximum - state->decoded) return -HTTP_BODY_TOO_LARGE;
            p = (size_t)end + 2;
            state->remaining = size;
            state->state = size ? CHUNK_DATA : CHUNK_TRAILERS;
        } else if (state->state == CHUNK_DATA) {
            size_t available = *length - p;
            size_t n = state->remaining < available ? (size_t)state->remaining : available;
            memmove(bytes + base + state->decoded, bytes + p, n);
            state->decoded += n;
            state->remaining -= n;
            p += n;
            if (state->remaining) break;
            state->state = CHUNK_DATA_END;
        } else if (state->state == CHUNK_DATA_END) {
            if (*length - p < 2) break;
            if (bytes[p] != '\r' || bytes[p + 1] != '\n') return -HTTP_BAD_CHUNKS;
            p += 2;
            state->state = CHUNK_SIZE;
        } else {
            long end = chunk_line(bytes, *length, p, TRAILERS_MAXIMUM);
            if (end == -2) break;
            if (end < 0 || has_control(bytes, p, (size_t)end)) return -HTTP_BAD_CHUNKS;
            state->trailer_bytes += (size_t)end + 2 - p;
            if (state->trailer_bytes > TRAILERS_MAXIMUM) return -HTTP_BAD_CHUNKS;
            int blank = (size_t)end == p;
            p = (size_t)end + 2;
            if (blank) result = 1;
        }
    }
    // What is not decoded yet moves down to follow the decoded bytes.
    size_t kept = base + state->decoded;
    memmove(bytes + kept, bytes + p, *length - p);
    *length = kept + (*length - p);
    if (result == 1) *consumed = kept;
    return result;
}

void spark_http_framing_reset(struct spark_http_framing *framing) {
    free(framing->head);
    *framing = (struct spark_http_framing){0};
}

int spark_http_frame(
    struct spark_http_framing *framing, uint8_t *bytes, size_t *length, size_t maximum_body, size_t *body_length,
    size_t *consumed) {
    if (!framing->head_length) {
        if (!framing->head && !(framing->head = calloc(1, sizeof *framing->head))) return -HTTP_SERVER_BUSY;
        struct http_head *head = framing->head;
        int parsed = spark_http_parse_head(bytes, *length, head);
        if (parsed <= 0) return parsed;
        if (!head->chunked && head->content_length > maximum_body) return -HTTP_BODY_TOO_LARGE;
        framing->head_length = head->length;
        framing->content_length = head->content_length;
        framing->chunked = (uint8_t)head->chunked;
        framing->expect_continue = (uint8_t)head->expect_continue;
    }
    size_t head = framing->head_length;
    if (framing->chunked) {
        int decoded = spark_http_decode_chunks(bytes, length, head, maximum_body, &framing->chunks, consumed);
        if (decoded == 1) *body_length = framing->chunks.decoded;
        return decoded;
    }
    size_t whole = head + (size_t)framing->content_length;
    if (*length < whole) return 0;
    *body_length = (size_t)framing->content_length;
    *consumed = whole;
    return 1;
}

// MARK: - Framing without a socket (the fuzzer and the tests)

int spark_http_parse(const uint8_t *bytes, size_t length, size_t maximum_body, size_t *consumed, size_t *body_length) {
    uint8_t *copy = malloc(length ? length : 1);
    if (!copy) return 0;
    memcpy(copy, bytes, length);
    struct spark_http_framing framing = {0};
    size_t copy_length = length, taken = 0, body = 0;
    int framed = spark_http_frame(&framing, copy, &copy_length, maximum_body, &body, &taken);
    int result = framed < 0 ? -(int)spark_http_refusal_status((enum http_refusal)-framed) : framed;
    if (framed == 1) {
        // Decoding a chunked body in place dropped its framing: what was taken of the input is
        // longer by as much.
        *consumed = taken + (length - copy_length);
        *body_length = body;
        // The path and the arguments decode (or are refused) as the server decodes them, from
        // the head the framing parsed (its spans index the head, which decoding left as it was).
        const struct http_head *head = framing.head;
        char *text = malloc(length + 1);
        if (text) {
            if (spark_http_unescape((const char *)bytes + head->path.start, head->path.length, text, 0) < 0) result = -400;
            if (spark_http_unescape((const char *)bytes + head->query.start, head->query.length, text, 1) < 0) result = -400;
        }
        free(text);
    }
    spark_http_framing_reset(&framing);
    free(copy);
    return result;
}

int spark_http_parse_in_pieces(
    const uint8_t *bytes, size_t length, size_t maximum_body, size_t piece, size_t *consumed, size_t *body_length) {
    if (piece == 0) piece = 1;
    uint8_t *buffer = malloc(length ? length : 1);
    if (!buffer) return 0;
    // As the server reads: each piece appended after what is kept (a chunked body shrinks as it is
    // decoded), and the framing resumed with it.
    struct spark_http_framing framing = {0};
    size_t fed = 0, kept = 0, taken = 0, body = 0;
    int framed = 0;
    while (framed == 0 && fed < length) {
        size_t n = length - fed < piece ? length - fed : piece;
        memcpy(buffer + kept, bytes + fed, n);
        fed += n;
        kept += n;
        framed = spark_http_frame(&framing, buffer, &kept, maximum_body, &body, &taken);
    }
    spark_http_framing_reset(&framing);
    free(buffer);
    if (framed < 0) return -(int)spark_http_refusal_status((enum http_refusal)-framed);
    if (framed == 1) {
        *consumed = taken + (fed - kept);
        *body_length = body;
    }
    return framed;
}
