// The PROXY protocol v2 header (haproxy's, section 2.2). Behind haproxy in TCP mode every
// connection comes from the proxy's address, so the per-address limits would lump all clients
// together: a connection from a configured proxy (never from anyone else) must begin with this
// header, and the client address it names is the connection's (CSparkHTTP.c reads it before TLS
// starts, as the connection's first state).
#define _GNU_SOURCE
#include "CSparkProxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static const uint8_t signature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

enum { HEADER_MAXIMUM = 16 + 1024 };

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
