// The PROXY protocol v2 header (CSparkProxy.c), private to the HTTP server.
#ifndef C_SPARK_PROXY_H
#define C_SPARK_PROXY_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/// Parses a header (see spark_proxy_header_parse): on 1, `*client_length` is 0 when the
/// connection keeps its own address.
int spark_proxy_parse(
    const uint8_t *bytes, size_t length, size_t *consumed, struct sockaddr_storage *client, socklen_t *client_length);
/// A proxy's address as IPv6 (an IPv4 one mapped); 0 when `text` is not an IP address.
int spark_proxy_address(const char *text, struct in6_addr *out);

#endif
