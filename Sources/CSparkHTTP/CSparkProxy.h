// The PROXY protocol v2 acceptor (CSparkProxy.c), private to the HTTP server.
#ifndef C_SPARK_PROXY_H
#define C_SPARK_PROXY_H

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "CSparkHTTP.h"

struct spark_proxy_acceptor;

/// Parses a header (see spark_proxy_header_parse): on 1, `*client_length` is 0 when the
/// connection keeps its own address.
int spark_proxy_parse(
    const uint8_t *bytes, size_t length, size_t *consumed, struct sockaddr_storage *client, socklen_t *client_length);
/// A proxy's address as IPv6 (an IPv4 one mapped); 0 when `text` is not an IP address.
int spark_proxy_address(const char *text, struct in6_addr *out);
/// Accepts on `listen_fd` (non-blocking, listening) and hands each connection to `daemon`,
/// after its header when it comes from one of `proxies`. Owns `listen_fd` from then on.
struct spark_proxy_acceptor *spark_proxy_start(
    struct MHD_Daemon *daemon, int listen_fd, const struct in6_addr *proxies, size_t proxy_count, char *error,
    size_t error_size);
/// Stops accepting, closes the listening socket and the connections still waiting for a header.
void spark_proxy_stop(struct spark_proxy_acceptor *acceptor);

#endif
