// How the HTTP server's and the certificate maker's C functions write an error message for Swift
// into the caller's buffer: every formatted write checked, a message that does not fit cut with
// "..." (never unterminated, never past the buffer).
#ifndef C_SPARK_HTTP_ERROR_H
#define C_SPARK_HTTP_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/// Writes the formatted message into `error` (`size` bytes, none when 0).
__attribute__((format(printf, 3, 4))) static inline void spark_set_error(char *error, size_t size, const char *format, ...) {
    if (!error || size == 0) return;
    va_list arguments;
    va_start(arguments, format);
    int written = vsnprintf(error, size, format, arguments);
    va_end(arguments);
    if (written < 0) {
        // An encoding error in an argument: the message says so rather than leaving it half made.
        snprintf(error, size, "%s", "an error whose message could not be formatted");
    } else if ((size_t)written >= size && size > 3) {
        memcpy(error + size - 4, "...", 4);
    }
}

#endif
