// The per-address accounting of the HTTP/1.1 server, and only it: a client's address and the keys
// it is counted under, the connections each address holds (against `per_address_limit`), and the
// bytes of request bodies each address, each charge key (a token's user) and the whole server hold
// (against the body budgets). Every table and count of it is here, under `addresses_lock`; the
// other files call in (CSparkHTTP.c when it accepts, CSparkHTTPConnection.c as a connection reads
// and closes) and this file calls none of theirs.
#include "CSparkHTTPInternal.h"

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

/// `address` cut to its first `bits` bits when it is IPv6 (an IPv4-mapped address is whole).
void spark_http_limit_key(const struct in6_addr *address, unsigned bits, struct in6_addr *out) {
    *out = *address;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    if (memcmp(address->s6_addr, mapped, sizeof mapped) == 0 || bits == 0 || bits >= 128) return;
    for (unsigned bit = bits; bit < 128; bit++) out->s6_addr[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));
}

/// The connection's address as text, and the keys of the proxy check and the per-address counts.
void spark_http_set_address(struct connection *connection, const struct sockaddr *address) {
    connection->address[0] = 0;
    memset(&connection->address_key, 0, sizeof connection->address_key);
    as_ipv6(address, &connection->address_key);
    spark_http_limit_key(&connection->address_key, connection->worker->server->ipv6_prefix, &connection->limit_key);
    if (address->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, connection->address, sizeof connection->address);
    } else if (address->sa_family == AF_INET6) {
        inet_ntop(
            AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, connection->address, sizeof connection->address);
    }
}

static size_t address_bucket(const struct in6_addr *address) {
    uint32_t hash = 2166136261u;
    for (int i = 0; i < 16; i++) hash = (hash ^ address->s6_addr[i]) * 16777619u;
    return hash % ADDRESS_BUCKETS;
}

/// The entry of `key` in the address table (the lock held), made when `create` and missing.
static struct address_count *address_entry(struct spark_http_server *server, const struct in6_addr *key, int create) {
    size_t bucket = address_bucket(key);
    struct address_count *entry = server->addresses[bucket];
    while (entry && memcmp(&entry->address, key, sizeof entry->address) != 0) entry = entry->next;
    if (!entry && create) {
        entry = calloc(1, sizeof *entry);
        if (entry) {
            entry->address = *key;
            entry->next = server->addresses[bucket];
            server->addresses[bucket] = entry;
        }
    }
    return entry;
}

/// Drops the entry of an address or a charge key once it counts no connection and holds no
/// body (the lock held).
static void forget_if_empty(struct spark_http_server *server, const struct in6_addr *key) {
    struct address_count **link = &server->addresses[address_bucket(key)];
    while (*link && memcmp(&(*link)->address, key, sizeof (*link)->address) != 0) link = &(*link)->next;
    if (*link && (*link)->count == 0 && (*link)->buffered == 0) {
        struct address_count *gone = *link;
        *link = gone->next;
        free(gone);
    }
}

/// Sets the key the connection's bodies are charged to besides its address (NULL: none). Only
/// while it holds no body: a key changes between requests, never under a charge.
void spark_http_set_charge_key(struct connection *connection, const char *key) {
    if (connection->charged) return;
    connection->has_charge_key = key != NULL;
    if (!key) return;
    uint64_t first = 14695981039346656037ull, second = 1099511628211ull ^ 0x9E3779B97F4A7C15ull;
    for (const unsigned char *byte = (const unsigned char *)key; *byte; byte++) {
        first = (first ^ *byte) * 1099511628211ull;
        second = (second ^ *byte) * 0x100000001B3ull + 0x2545F4914F6CDD1Dull;
    }
    struct in6_addr digest;
    memcpy(digest.s6_addr, &first, 8);
    memcpy(digest.s6_addr + 8, &second, 8);
    digest.s6_addr[0] = 0xFF;
    digest.s6_addr[1] = 0x55;
    connection->charge_key = digest;
}

/// Counts the connection toward its address: 0 when that address is at its limit.
int spark_http_count_address(struct spark_http_server *server, struct connection *connection) {
    int admitted = 0;
    pthread_mutex_lock(&server->addresses_lock);
    struct address_count *entry = address_entry(server, &connection->limit_key, 1);
    if (entry && entry->count < server->per_address_limit) {
        entry->count++;
        admitted = 1;
    }
    pthread_mutex_unlock(&server->addresses_lock);
    connection->counted = admitted;
    return admitted;
}

void spark_http_uncount_address(struct spark_http_server *server, struct connection *connection) {
    if (!connection->counted) return;
    pthread_mutex_lock(&server->addresses_lock);
    struct address_count *entry = address_entry(server, &connection->limit_key, 0);
    if (entry && entry->count) entry->count--;
    forget_if_empty(server, &connection->limit_key);
    pthread_mutex_unlock(&server->addresses_lock);
    connection->counted = 0;
}

/// Moves the connection's charge toward the body budgets to what an `in` of `capacity` bytes
/// costs: 1 when done, 0 when the whole server would pass its budget, -1 when its address (or
/// its charge key: the token's user, from any address) would. Shrinking always succeeds.
int spark_http_charge(struct connection *connection, size_t capacity) {
    struct spark_http_server *server = connection->worker->server;
    size_t wanted = capacity > HTTP_HEAD_MAXIMUM ? capacity - HTTP_HEAD_MAXIMUM : 0;
    if (wanted == connection->charged) return 1;
    pthread_mutex_lock(&server->addresses_lock);
    struct address_count *entry = connection->counted ? address_entry(server, &connection->limit_key, 0) : NULL;
    struct address_count *user = connection->has_charge_key ? address_entry(server, &connection->charge_key, 1) : NULL;
    int result = 1;
    if (wanted > connection->charged) {
        size_t more = wanted - connection->charged;
        if ((entry && entry->buffered + more > server->per_address_body_budget)
            || (user && user->buffered + more > server->per_address_body_budget)) {
            result = -1;
        } else if (atomic_fetch_add(&server->buffered, more) + more > server->body_budget) {
            atomic_fetch_sub(&server->buffered, more);
            result = 0;
        } else {
            if (entry) entry->buffered += more;
            if (user) user->buffered += more;
        }
    } else {
        size_t less = connection->charged - wanted;
        atomic_fetch_sub(&server->buffered, less);
        if (entry) entry->buffered -= less < entry->buffered ? less : entry->buffered;
        if (user) user->buffered -= less < user->buffered ? less : user->buffered;
    }
    if (result == 1) connection->charged = wanted;
    if (user) forget_if_empty(server, &connection->charge_key);
    pthread_mutex_unlock(&server->addresses_lock);
    return result;
}

/// Whether `address` is one of the proxies the server takes a PROXY header from.
int spark_http_from_proxy(const struct spark_http_server *server, const struct in6_addr *address) {
    for (size_t i = 0; i < server->proxy_count; i++) {
        if (memcmp(&server->proxies[i], address, sizeof *address) == 0) return 1;
    }
    return 0;
}
