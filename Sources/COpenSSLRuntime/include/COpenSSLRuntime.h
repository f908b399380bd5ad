#ifndef C_OPENSSL_RUNTIME_H
#define C_OPENSSL_RUNTIME_H

/// 1 when OpenSSL was initialised, before `main`, without its exit-time cleanup; 0 when that
/// initialisation failed (OpenSSL then cleans up at exit as it does by default).
int spark_openssl_runtime_status(void);

#endif
