// OpenSSL registers OPENSSL_cleanup with atexit() the first time it initialises. A process
// that exits while another thread is still inside libcrypto (an SDK poll loop, a token check
// in flight) then has that thread use freed tables: about one exit in two crashed in our test.
// Initialising once before main with OPENSSL_INIT_NO_ATEXIT leaves libcrypto's state alone at
// exit; the operating system reclaims it with the process. The first initialisation decides,
// which is why this runs as a constructor rather than from Swift.
#include "COpenSSLRuntime.h"

#include <openssl/crypto.h>

static int spark_openssl_status = 0;

__attribute__((constructor)) static void spark_openssl_runtime_init(void) {
    spark_openssl_status = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL) == 1 ? 1 : 0;
}

int spark_openssl_runtime_status(void) { return spark_openssl_status; }
