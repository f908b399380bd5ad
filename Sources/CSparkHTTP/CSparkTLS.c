// The private CA and server certificate `spark-domaind init` makes, with OpenSSL.
#include "CSparkHTTP.h"
#include "CSparkHTTPError.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static EVP_PKEY *make_key(void) { return EVP_EC_gen("P-256"); }

static int add_extension(X509 *certificate, X509 *issuer, int nid, const char *value) {
    X509V3_CTX context;
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, issuer, certificate, NULL, NULL, 0);
    X509_EXTENSION *extension = X509V3_EXT_conf_nid(NULL, &context, nid, value);
    if (!extension) return 0;
    int ok = X509_add_ext(certificate, extension, -1);
    X509_EXTENSION_free(extension);
    return ok;
}

static X509 *make_certificate(EVP_PKEY *key, const char *common_name, unsigned days) {
    X509 *certificate = X509_new();
    if (!certificate) return NULL;
    X509_set_version(certificate, 2);
    unsigned char serial[16];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f;
    BIGNUM *number = BN_bin2bn(serial, sizeof serial, NULL);
    BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate));
    BN_free(number);
    X509_gmtime_adj(X509_getm_notBefore(certificate), -3600);
    X509_gmtime_adj(X509_getm_notAfter(certificate), (long)days * 86400);
    X509_set_pubkey(certificate, key);
    X509_NAME *name = X509_get_subject_name(certificate);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)common_name, -1, -1, 0);
    return certificate;
}

/// What a PEM writer put into a memory BIO, as a malloc'd string (NULL when it failed).
static char *take_text(BIO *bio, int written) {
    char *text = NULL;
    if (bio && written) {
        char *data;
        long length = BIO_get_mem_data(bio, &data);
        text = calloc(1, (size_t)length + 1);
        if (text) memcpy(text, data, (size_t)length);
    }
    BIO_free(bio);
    return text;
}

static char *pem_certificate(X509 *certificate) {
    BIO *bio = BIO_new(BIO_s_mem());
    return take_text(bio, bio && PEM_write_bio_X509(bio, certificate));
}

static char *pem_key(EVP_PKEY *key) {
    BIO *bio = BIO_new(BIO_s_mem());
    return take_text(bio, bio && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL));
}

/// Adds a server certificate's extensions (its names as subjectAltName, when given) and signs it.
static int finish_server(X509 *server, X509 *authority, EVP_PKEY *authority_key, const char *alternatives) {
    return add_extension(server, authority, NID_basic_constraints, "critical,CA:FALSE")
        && add_extension(server, authority, NID_key_usage, "critical,digitalSignature")
        && add_extension(server, authority, NID_ext_key_usage, "serverAuth")
        && add_extension(server, authority, NID_authority_key_identifier, "keyid:always")
        && (!alternatives || add_extension(server, authority, NID_subject_alt_name, alternatives))
        && X509_sign(server, authority_key, EVP_sha256());
}

int spark_tls_make_certificates(
    const char *common_name, const char *const *names, size_t name_count, unsigned ca_days, unsigned server_days,
    char **ca_certificate, char **ca_key, char **server_certificate, char **server_key, char *error, size_t error_size) {
    int ok = 0;
    EVP_PKEY *authority_key = make_key();
    EVP_PKEY *key = make_key();
    X509 *authority = NULL, *server = NULL;
    char *alternatives = NULL;
    char authority_name[300];
    int named = snprintf(authority_name, sizeof authority_name, "%s private CA", common_name);
    if (named < 0 || (size_t)named >= sizeof authority_name) {
        // Never a CA named by a cut name: the caller's name is refused.
        spark_set_error(error, error_size, "the common name is longer than %zu bytes", sizeof authority_name - 12);
        goto done_quietly;
    }
    if (!authority_key || !key) goto done;

    authority = make_certificate(authority_key, authority_name, ca_days);
    if (!authority) goto done;
    X509_set_issuer_name(authority, X509_get_subject_name(authority));
    if (!add_extension(authority, authority, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_extension(authority, authority, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_extension(authority, authority, NID_subject_key_identifier, "hash") ||
        !X509_sign(authority, authority_key, EVP_sha256()))
        goto done;

    server = make_certificate(key, common_name, server_days);
    if (!server) goto done;
    X509_set_issuer_name(server, X509_get_subject_name(authority));
    size_t capacity = 1;
    for (size_t i = 0; i < name_count; i++) capacity += strlen(names[i]) + 8;
    alternatives = calloc(1, capacity);
    if (!alternatives) goto done;
    for (size_t i = 0; i < name_count; i++) {
        unsigned char address[16];
        int is_address = inet_pton(AF_INET, names[i], address) == 1 || inet_pton(AF_INET6, names[i], address) == 1;
        if (i) strcat(alternatives, ",");
        strcat(alternatives, is_address ? "IP:" : "DNS:");
        strcat(alternatives, names[i]);
    }
    if (!finish_server(server, authority, authority_key, name_count ? alternatives : NULL)) goto done;

    *ca_certificate = pem_certificate(authority);
    *ca_key = pem_key(authority_key);
    *server_certificate = pem_certificate(server);
    *server_key = pem_key(key);
    ok = *ca_certificate && *ca_key && *server_certificate && *server_key;
done:
    if (!ok) {
        unsigned long code = ERR_get_error();
        spark_set_error(error, error_size, "making the certificates failed: %s", code ? ERR_reason_error_string(code) : "a name is invalid");
    }
done_quietly:
    free(alternatives);
    X509_free(authority);
    X509_free(server);
    EVP_PKEY_free(authority_key);
    EVP_PKEY_free(key);
    return ok;
}

int spark_tls_renew_certificate(
    const char *ca_certificate, const char *ca_key, const char *old_certificate, unsigned days, unsigned renew_within_days,
    char **server_certificate, char **server_key, char *error, size_t error_size) {
    int result = -1;
    BIO *ca_bio = BIO_new_mem_buf(ca_certificate, -1), *key_bio = BIO_new_mem_buf(ca_key, -1),
        *old_bio = BIO_new_mem_buf(old_certificate, -1);
    X509 *authority = ca_bio ? PEM_read_bio_X509(ca_bio, NULL, NULL, NULL) : NULL;
    EVP_PKEY *authority_key = key_bio ? PEM_read_bio_PrivateKey(key_bio, NULL, NULL, NULL) : NULL;
    X509 *old = old_bio ? PEM_read_bio_X509(old_bio, NULL, NULL, NULL) : NULL;
    X509 *server = NULL;
    EVP_PKEY *key = NULL;
    X509_EXTENSION *names = NULL;
    if (!authority || !authority_key || !old || X509_check_private_key(authority, authority_key) != 1) {
        spark_set_error(error, error_size, "the CA, its key or the certificate is not readable PEM, or the key is not the CA's");
        goto done;
    }
    // Only a certificate this CA issued is renewed (one the operator gave stays as it is), and
    // only when it ends within `renew_within_days`.
    int day = 0, second = 0;
    if (X509_check_issued(authority, old) != X509_V_OK || X509_verify(old, authority_key) != 1
        || !ASN1_TIME_diff(&day, &second, NULL, X509_get0_notAfter(old))) {
        result = 0;
        goto done;
    }
    if (day > (int)renew_within_days) {
        result = 0;
        goto done;
    }
    char common_name[256] = "";
    X509_NAME_get_text_by_NID(X509_get_subject_name(old), NID_commonName, common_name, sizeof common_name);
    key = make_key();
    server = key ? make_certificate(key, common_name, days) : NULL;
    int index = X509_get_ext_by_NID(old, NID_subject_alt_name, -1);
    if (index >= 0) names = X509_EXTENSION_dup(X509_get_ext(old, index));
    if (!server || !X509_set_issuer_name(server, X509_get_subject_name(authority)) || (index >= 0 && !names)
        || (names && !X509_add_ext(server, names, -1)) || !finish_server(server, authority, authority_key, NULL)) {
        spark_set_error(error, error_size, "renewing the certificate failed");
        goto done;
    }
    *server_certificate = pem_certificate(server);
    *server_key = pem_key(key);
    if (!*server_certificate || !*server_key) {
        free(*server_certificate);
        free(*server_key);
        *server_certificate = *server_key = NULL;
        spark_set_error(error, error_size, "out of memory");
        goto done;
    }
    result = 1;
done:
    ERR_clear_error();
    X509_EXTENSION_free(names);
    X509_free(server);
    EVP_PKEY_free(key);
    X509_free(old);
    X509_free(authority);
    EVP_PKEY_free(authority_key);
    BIO_free(ca_bio);
    BIO_free(key_bio);
    BIO_free(old_bio);
    return result;
}
