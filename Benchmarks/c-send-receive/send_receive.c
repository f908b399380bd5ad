// The C half of spark-bench's c-api-send-receive row, built with cc against the installed release
// library (scripts/install.sh), as an app builds it: alice sends COUNT messages with spark_send
// and bob takes them from spark_next_event. Prints the messages a second.
//
//   send_receive CONFIG DATA_DIR COUNT
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <spark/spark.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(spark_status status, const char *what) {
    if (status != SPARK_OK) {
        fprintf(stderr, "%s: %s\n", what, spark_last_error());
        exit(1);
    }
}

static int passcode(void *context, int is_new, const char *problem, char *buffer, size_t size) {
    (void)context;
    (void)is_new;
    if (problem) return 0;
    snprintf(buffer, size, "bench-passcode-2026");
    return 1;
}

static spark_client *device(const char *config, const char *directory, const char *user) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", directory, user);
    spark_client *client = NULL;
    check(spark_client_open(config, path, &client), "open");
    check(spark_sign_in_test(client, user), "sign in");
    spark_setup_handlers handlers = {0};
    handlers.passcode = passcode;
    check(spark_complete_setup(client, &handlers), "setup");
    return client;
}

/// Waits on bob's event descriptor until `messages` messages arrived (two minutes at most).
static void drain(spark_client *client, long messages) {
    long received = 0;
    struct pollfd watched = {.fd = spark_event_fd(client), .events = POLLIN};
    time_t deadline = time(NULL) + 120;
    while (received < messages) {
        if (time(NULL) > deadline) {
            fprintf(stderr, "bob got %ld of %ld\n", received, messages);
            exit(1);
        }
        spark_event *event = NULL;
        while (spark_next_event(client, &event) == SPARK_OK && event) {
            if (event->kind == SPARK_EVENT_MESSAGE) received++;
            spark_event_free(event);
            event = NULL;
        }
        if (received < messages) poll(&watched, 1, 100);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: send_receive CONFIG DATA_DIR COUNT\n");
        return 64;
    }
    long count = atol(argv[3]);
    spark_client *alice = device(argv[1], argv[2], "alice");
    spark_client *bob = device(argv[1], argv[2], "bob");
    const char *users[] = {"bob"};
    char *chat_id = NULL;
    check(spark_start_chat(alice, users, 1, "bench", &chat_id), "start chat");
    // One message first, so the chat is set up on both sides before the clock starts.
    check(spark_send(alice, chat_id, "warm-up", NULL), "send");
    drain(bob, 1);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    char text[64];
    for (long i = 0; i < count; i++) {
        snprintf(text, sizeof text, "message %ld", i);
        check(spark_send(alice, chat_id, text, NULL), "send");
    }
    drain(bob, count);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    printf("%.1f\n", (double)count / seconds);
    spark_free(chat_id);
    spark_client_close(alice);
    spark_client_close(bob);
    return 0;
}
