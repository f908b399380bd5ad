// The PROXY protocol v2 in front of libmicrohttpd. Behind haproxy in TCP mode every connection
// comes from the proxy's address, so the per-address limits would lump all clients together.
// When proxies are configured the server owns its listening socket: a thread accepts, reads the
// header from a connection that comes from a configured proxy (never from anyone else), and
// hands the connection to libmicrohttpd with the client's address the header names
// (MHD_add_connection), so libmicrohttpd's per-address cap and the request's address are the
// client's. TLS starts after the header, inside libmicrohttpd, as for any connection.
#define _GNU_SOURCE
#include "CSparkProxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const uint8_t signature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

enum { HEADER_MAXIMUM = 16 + 1024, HEADER_TIMEOUT_MS = 5000, MAXIMUM_PENDING = 512 };

int spark_proxy_parse(
    const uint8_t *bytes, size_t length, size_t *consumed, struct sockaddr_storage *client, socklen_t *client_length) {
    size_t prefix = length < sizeof signature ? length : sizeof signature;
    if (memcmp(bytes, signature, prefix) != 0) return -1;
    if (length < 16) return 0;
    uint8_t version = bytes[12] >> 4, command = bytes[12] & 0x0F, family = bytes[13];
    size_t body = (size_t)bytes[14] << 8 | bytes[15];
    if (version != 2 || command > 1 || 16 + body > HEADER_MAXIMUM) return -1;
    if (length < 16 + body) return 0;
    *consumed = 16 + body;
    *client_length = 0;
    // LOCAL (the proxy's own check) and UNSPEC keep the connection's address.
    if (command == 0 || family == 0x00) return 1;
    const uint8_t *address = bytes + 16;
    memset(client, 0, sizeof *client);
    if (family == 0x11) {  // TCP over IPv4: source, destination, source port, destination port
        if (body < 12) return -1;
        struct sockaddr_in *v4 = (struct sockaddr_in *)client;
        v4->sin_family = AF_INET;
        memcpy(&v4->sin_addr, address, 4);
        memcpy(&v4->sin_port, address + 8, 2);
        *client_length = sizeof *v4;
        return 1;
    }
    if (family == 0x21) {  // TCP over IPv6
        if (body < 36) return -1;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)client;
        v6->sin6_family = AF_INET6;
        memcpy(&v6->sin6_addr, address, 16);
        memcpy(&v6->sin6_port, address + 32, 2);
        *client_length = sizeof *v6;
        return 1;
    }
    // UDP or UNIX sockets: not what an HTTP server behind a TCP proxy is sent.
    return -1;
}

int spark_proxy_header_parse(const uint8_t *bytes, size_t length, size_t *consumed, char *address, size_t address_size) {
    struct sockaddr_storage client;
    socklen_t client_length = 0;
    int result = spark_proxy_parse(bytes, length, consumed, &client, &client_length);
    if (address_size) address[0] = 0;
    if (result != 1 || client_length == 0) return result;
    if (client.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&client)->sin_addr, address, (socklen_t)address_size);
    } else {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&client)->sin6_addr, address, (socklen_t)address_size);
    }
    return 1;
}

struct pending {
    int fd;
    long long deadline;
    struct sockaddr_storage peer;
    socklen_t peer_length;
};

struct spark_proxy_acceptor {
    struct MHD_Daemon *daemon;
    int listen_fd;
    int wake[2];
    pthread_t thread;
    /// The proxies, as IPv6 addresses (IPv4 ones mapped).
    struct in6_addr *proxies;
    size_t proxy_count;
    struct pending pending[MAXIMUM_PENDING];
    size_t pending_count;
};

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

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

static int from_proxy(const struct spark_proxy_acceptor *acceptor, const struct sockaddr *peer) {
    struct in6_addr address;
    if (!as_ipv6(peer, &address)) return 0;
    for (size_t i = 0; i < acceptor->proxy_count; i++) {
        if (memcmp(&acceptor->proxies[i], &address, sizeof address) == 0) return 1;
    }
    return 0;
}

/// Reads what has arrived of a proxy's header: 1 when the connection was handed over (or closed
/// by libmicrohttpd), 0 when more is needed, -1 when it must be closed.
static int take_header(struct spark_proxy_acceptor *acceptor, struct pending *connection) {
    uint8_t bytes[HEADER_MAXIMUM];
    ssize_t received = recv(connection->fd, bytes, sizeof bytes, MSG_PEEK);
    if (received == 0) return -1;
    if (received < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    size_t consumed = 0;
    struct sockaddr_storage client;
    socklen_t client_length = 0;
    int parsed = spark_proxy_parse(bytes, (size_t)received, &consumed, &client, &client_length);
    if (parsed <= 0) return parsed;
    // The header is here whole: take exactly it, leaving what follows (HTTP or TLS) unread.
    if (recv(connection->fd, bytes, consumed, 0) != (ssize_t)consumed) return -1;
    if (client_length == 0) {
        client = connection->peer;
        client_length = connection->peer_length;
    }
    MHD_add_connection(acceptor->daemon, connection->fd, (const struct sockaddr *)&client, client_length);
    return 1;
}

static void drop_pending(struct spark_proxy_acceptor *acceptor, size_t index, int close_it) {
    if (close_it) close(acceptor->pending[index].fd);
    acceptor->pending[index] = acceptor->pending[--acceptor->pending_count];
}

static void accept_waiting(struct spark_proxy_acceptor *acceptor) {
    for (int round = 0; round < 64; round++) {
        struct sockaddr_storage peer;
        socklen_t peer_length = sizeof peer;
        int fd = accept4(acceptor->listen_fd, (struct sockaddr *)&peer, &peer_length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        if (!from_proxy(acceptor, (struct sockaddr *)&peer)) {
            // Not a proxy: its bytes are HTTP (or TLS) from the start, and its address is its own.
            MHD_add_connection(acceptor->daemon, fd, (struct sockaddr *)&peer, peer_length);
            continue;
        }
        if (acceptor->pending_count == MAXIMUM_PENDING) {
            close(fd);
            continue;
        }
        struct pending *waiting = &acceptor->pending[acceptor->pending_count++];
        waiting->fd = fd;
        waiting->deadline = now_ms() + HEADER_TIMEOUT_MS;
        waiting->peer = peer;
        waiting->peer_length = peer_length;
    }
}

static void *acceptor_main(void *argument) {
    struct spark_proxy_acceptor *acceptor = argument;
    struct pollfd polled[2 + MAXIMUM_PENDING];
    for (;;) {
        size_t count = acceptor->pending_count;
        polled[0] = (struct pollfd){.fd = acceptor->wake[0], .events = POLLIN};
        polled[1] = (struct pollfd){.fd = acceptor->listen_fd, .events = POLLIN};
        long long now = now_ms(), first = -1;
        for (size_t i = 0; i < count; i++) {
            polled[2 + i] = (struct pollfd){.fd = acceptor->pending[i].fd, .events = POLLIN};
            if (first < 0 || acceptor->pending[i].deadline < first) first = acceptor->pending[i].deadline;
        }
        int timeout = first < 0 ? -1 : (first > now ? (int)(first - now) : 0);
        if (poll(polled, 2 + count, timeout) < 0 && errno != EINTR) break;
        if (polled[0].revents) break;
        now = now_ms();
        // From the last down, so that a removal (the last moved into its place) skips nothing.
        for (size_t i = count; i-- > 0;) {
            if (polled[2 + i].revents) {
                int taken = take_header(acceptor, &acceptor->pending[i]);
                if (taken != 0) {
                    drop_pending(acceptor, i, taken < 0);
                    continue;
                }
            }
            if (now >= acceptor->pending[i].deadline) drop_pending(acceptor, i, 1);
        }
        if (polled[1].revents & POLLIN) accept_waiting(acceptor);
    }
    return NULL;
}

struct spark_proxy_acceptor *spark_proxy_start(
    struct MHD_Daemon *daemon, int listen_fd, const struct in6_addr *proxies, size_t proxy_count, char *error,
    size_t error_size) {
    struct spark_proxy_acceptor *acceptor = calloc(1, sizeof *acceptor);
    if (!acceptor || pipe2(acceptor->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(acceptor);
        snprintf(error, error_size, "cannot start the PROXY protocol acceptor");
        return NULL;
    }
    acceptor->daemon = daemon;
    acceptor->listen_fd = listen_fd;
    acceptor->proxies = malloc(proxy_count * sizeof *proxies);
    if (!acceptor->proxies) goto failed;
    memcpy(acceptor->proxies, proxies, proxy_count * sizeof *proxies);
    acceptor->proxy_count = proxy_count;
    if (pthread_create(&acceptor->thread, NULL, acceptor_main, acceptor) != 0) goto failed;
    return acceptor;
failed:
    snprintf(error, error_size, "cannot start the PROXY protocol acceptor");
    close(acceptor->wake[0]);
    close(acceptor->wake[1]);
    free(acceptor->proxies);
    free(acceptor);
    return NULL;
}

void spark_proxy_stop(struct spark_proxy_acceptor *acceptor) {
    if (!acceptor) return;
    ssize_t written = write(acceptor->wake[1], "x", 1);
    (void)written;
    pthread_join(acceptor->thread, NULL);
    for (size_t i = 0; i < acceptor->pending_count; i++) close(acceptor->pending[i].fd);
    close(acceptor->listen_fd);
    close(acceptor->wake[0]);
    close(acceptor->wake[1]);
    free(acceptor->proxies);
    free(acceptor);
}
