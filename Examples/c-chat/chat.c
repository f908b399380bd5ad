/*
 * c-chat: the Getting Started guide's two-user flow, in C. Alice and bob, two devices of one
 * machine (one client each), set up; alice starts a chat and sends; bob gets the message from
 * his event descriptor and reads it; alice sees her message delivered and read.
 *
 *   cc chat.c $(pkg-config --cflags --libs sparksdk) -o c-chat
 *   ./c-chat ConfigSettings.plist /tmp/c-chat
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spark/spark.h>

static int passcode(void *context, int is_new, const char *problem, char *buffer, size_t size) {
    (void)is_new;
    if (problem) return 0;
    snprintf(buffer, size, "%s-passcode-2026", (const char *)context);
    return 1;
}

static int check(const char *what, spark_status status) {
    if (status == SPARK_OK) return 0;
    fprintf(stderr, "c-chat: %s: %s (%s)\n", what, spark_last_error(), spark_status_name(status));
    return 1;
}

/* One user's device, signed in and set up. */
static spark_client *device(const char *config, const char *directory, const char *user) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", directory, user);
    spark_client *client;
    if (check("open", spark_client_open(config, path, &client))) return NULL;
    if (!spark_is_set_up(client, NULL)) {
        spark_setup_handlers handlers = {.passcode = passcode, .context = (void *)user};
        if (check("sign in", spark_sign_in_test(client, user)) || check("setup", spark_complete_setup(client, &handlers))) {
            spark_client_close(client);
            return NULL;
        }
    }
    return client;
}

/* Waits (up to a minute) for an event of `kind` on `client`, optionally about `message_id`. */
static spark_event *wait_for(spark_client *client, spark_event_kind kind, const char *message_id, int state) {
    struct pollfd watched = {.fd = spark_event_fd(client), .events = POLLIN};
    for (int rounds = 0; rounds < 600; rounds++) {
        spark_event *event;
        while (spark_next_event(client, &event) == SPARK_OK && event) {
            int wanted = event->kind == kind && (!message_id || (event->message_id && !strcmp(event->message_id, message_id)))
                         && (state < 0 || event->state == state);
            if (wanted) return event;
            spark_event_free(event);
        }
        poll(&watched, 1, 100);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: c-chat CONFIG.plist DIRECTORY\n");
        return 64;
    }
    spark_client *alice = device(argv[1], argv[2], "alice");
    spark_client *bob = device(argv[1], argv[2], "bob");
    if (!alice || !bob) return 1;
    printf("alice and bob are set up\n");

    const char *people[] = {"bob"};
    char *chat_id;
    if (check("start chat", spark_start_chat(alice, people, 1, "Lunch", &chat_id))) return 1;
    spark_message *sent;
    if (check("send", spark_send(alice, chat_id, "12:30 at the usual place?", &sent))) return 1;
    printf("alice sent #%lld: %s\n", (long long)sent->number, sent->content);

    spark_event *arrived = wait_for(bob, SPARK_EVENT_MESSAGE, sent->message_id, -1);
    if (!arrived) {
        fprintf(stderr, "c-chat: bob got nothing\n");
        return 1;
    }
    printf("bob got: %s from %s\n", arrived->message->content, arrived->message->sender);
    if (check("mark read", spark_mark_read(bob, arrived->chat_id))) return 1;
    spark_event_free(arrived);

    spark_event *read = wait_for(alice, SPARK_EVENT_MESSAGE_STATE, sent->message_id, SPARK_MESSAGE_READ);
    if (!read) {
        fprintf(stderr, "c-chat: alice never saw it read\n");
        return 1;
    }
    printf("alice's message is read\n");
    spark_event_free(read);

    spark_chat *chats;
    size_t count;
    if (check("list chats", spark_list_chats(bob, &chats, &count))) return 1;
    printf("bob has %zu chat(s): %s with %s\n", count, chats[0].subject, chats[0].participants);
    spark_chats_free(chats, count);

    char *number;
    if (check("safety number", spark_safety_number(alice, "bob", &number))) return 1;
    printf("alice and bob compare %s\n", number);
    spark_free(number);

    spark_messages_free(sent, 1);
    spark_free(chat_id);
    spark_client_close(alice);
    spark_client_close(bob);
    printf("done\n");
    return 0;
}
