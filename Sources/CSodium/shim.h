// libsodium for Swift: SparkCrypto signs and verifies Ed25519 with it (about twice OpenSSL 3.0's
// speed here). Swift imports everything it uses straight from the header, so no wrapper is needed.
#ifndef SPARK_CSODIUM_SHIM_H
#define SPARK_CSODIUM_SHIM_H

#include <sodium.h>

#endif
