/*
 * c-echo-bot: Spark's Linux message-echo sample, in C. The bot signs in, sets its device up,
 * and answers every message it gets with "echo: " and the text, until it has answered
 * MAX (the last argument; 0: forever). Events come through the client's file descriptor in a
 * poll(2) loop, as they would in GLib's or libuv's.
 *
 *   cc echo_bot.c $(pkg-config --cflags --libs sparksdk) -o echo-bot
 *   ./echo-bot ConfigSettings.plist /var/lib/echo-bot echo-bot 0
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spark/spark.h>

static int passcode(void *context, int is_new, const char *problem, char *buffer, size_t size) {
    (void)context;
    (void)is_new;
    if (problem) {
        fprintf(stderr, "echo-bot: the passcode was refused: %s\n", problem);
        return 0;
    }
    const char *secret = getenv("ECHO_BOT_PASSCODE");
    snprintf(buffer, size, "%s", secret ? secret : "echo-bot-passcode");
    return 1;
}

static int fail(const char *what, spark_status status) {
    fprintf(stderr, "echo-bot: %s: %s (%s)\n", what, spark_last_error(), spark_status_name(status));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: echo-bot CONFIG.plist DATA_DIRECTORY USER_ID MAX\n");
        return 64;
    }
    long maximum = strtol(argv[4], NULL, 10);
    spark_client *client;
    spark_status status = spark_client_open(argv[1], argv[2], &client);
    if (status != SPARK_OK) return fail("open", status);
    if (!spark_is_set_up(client, NULL)) {
        if ((status = spark_sign_in_test(client, argv[3])) != SPARK_OK) return fail("sign in", status);
        spark_setup_handlers handlers = {.passcode = passcode};
        if ((status = spark_complete_setup(client, &handlers)) != SPARK_OK) return fail("setup", status);
    }
    printf("echo-bot: %s is listening\n", argv[3]);
    fflush(stdout);

    long answered = 0;
    struct pollfd watched = {.fd = spark_event_fd(client), .events = POLLIN};
    while (maximum == 0 || answered < maximum) {
        if (poll(&watched, 1, -1) < 0) break;
        spark_event *event;
        while (spark_next_event(client, &event) == SPARK_OK && event) {
            if (event->kind == SPARK_EVENT_MESSAGE) {
                char reply[4096];
                snprintf(reply, sizeof reply, "echo: %s", event->message->content);
                status = spark_send(client, event->chat_id, reply, NULL);
                if (status != SPARK_OK) {
                    fail("send", status);
                } else {
                    printf("echo-bot: answered %s\n", event->message->sender);
                    fflush(stdout);
                    answered++;
                }
                spark_mark_read(client, event->chat_id);
            }
            spark_event_free(event);
        }
    }
    spark_client_close(client);
    return 0;
}
