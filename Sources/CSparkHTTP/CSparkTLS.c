// The private CA and server certificate `spark-domaind init` makes, with OpenSSL.
#include "CSparkHTTP.h"

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

int spark_tls_make_certificates(
    const char *common_name, const char *const *names, size_t name_count, unsigned days, char **ca_certificate,
    char **ca_key, char **server_certificate, char **server_key, char *error, size_t error_size) {
    int ok = 0;
    EVP_PKEY *authority_key = make_key();
    EVP_PKEY *key = make_key();
    X509 *authority = NULL, *server = NULL;
    char *alternatives = NULL;
    char authority_name[300];
    snprintf(authority_name, sizeof authority_name, "%s private CA", common_name);
    if (!authority_key || !key) goto done;

    authority = make_certificate(authority_key, authority_name, days);
    if (!authority) goto done;
    X509_set_issuer_name(authority, X509_get_subject_name(authority));
    if (!add_extension(authority, authority, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_extension(authority, authority, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_extension(authority, authority, NID_subject_key_identifier, "hash") ||
        !X509_sign(authority, authority_key, EVP_sha256()))
        goto done;

    server = make_certificate(key, common_name, days);
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
    if (!add_extension(server, authority, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_extension(server, authority, NID_key_usage, "critical,digitalSignature") ||
        !add_extension(server, authority, NID_ext_key_usage, "serverAuth") ||
        !add_extension(server, authority, NID_authority_key_identifier, "keyid:always") ||
        (name_count && !add_extension(server, authority, NID_subject_alt_name, alternatives)) ||
        !X509_sign(server, authority_key, EVP_sha256()))
        goto done;

    *ca_certificate = pem_certificate(authority);
    *ca_key = pem_key(authority_key);
    *server_certificate = pem_certificate(server);
    *server_key = pem_key(key);
    ok = *ca_certificate && *ca_key && *server_certificate && *server_key;
done:
    if (!ok) {
        unsigned long code = ERR_get_error();
        snprintf(error, error_size, "making the certificates failed: %s", code ? ERR_reason_error_string(code) : "a name is invalid");
    }
    free(alternatives);
    X509_free(authority);
    X509_free(server);
    EVP_PKEY_free(authority_key);
    EVP_PKEY_free(key);
    return ok;
}
