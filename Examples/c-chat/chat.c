/*
 * c-chat: the Getting Started guide's two-user flow, in C. Alice and bob, two devices of one
 * machine (one client each), set up; alice starts a chat and sends; bob gets the message from
 * his event descriptor and reads it; alice sees her message delivered and read. Then the rest of
 * a chat: bob reacts, alice sends a file with a thumbnail-less caption and bob saves it, alice
 * recalls a message, both see typing and a live chat event, and bob blocks and unblocks alice.
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

/* Prints a transfer's progress at its start and end. */
static void progress(void *context, int64_t done, int64_t total) {
    if (done == total) printf("%s: %lld of %lld bytes\n", (const char *)context, (long long)done, (long long)total);
}

/* Whether two files hold the same bytes. */
static int same_file(const char *a, const char *b) {
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    int same = x && y;
    while (same) {
        int c = fgetc(x), d = fgetc(y);
        if (c != d) same = 0;
        if (c == EOF || d == EOF) break;
    }
    if (x) fclose(x);
    if (y) fclose(y);
    return same;
}

/* Reactions, a file, a recall, typing, a chat event and a block, between alice and bob. */
static int rich(spark_client *alice, spark_client *bob, const char *chat_id, const char *message_id, const char *directory) {
    /* Bob reacts to alice's message; alice is told it changed and reads it again. */
    if (check("react", spark_react(bob, message_id, "\xF0\x9F\x91\x8D"))) return 1;
    spark_event *changed = wait_for(alice, SPARK_EVENT_MESSAGES_CHANGED, message_id, -1);
    if (!changed) {
        fprintf(stderr, "c-chat: alice never saw the reaction\n");
        return 1;
    }
    spark_event_free(changed);
    spark_message *reacted;
    if (check("get message", spark_get_message(alice, message_id, &reacted))) return 1;
    if (reacted->reaction_count != 1) return fprintf(stderr, "c-chat: %zu reaction(s)\n", reacted->reaction_count), 1;
    printf("alice's message has %s from %s\n", reacted->reactions[0].emoji, reacted->reactions[0].user_ids);
    spark_messages_free(reacted, 1);

    /* Bob searches his messages: the best match first, its match marked; a short prefix is refused. */
    char **ids, **snippets, *next;
    size_t found;
    if (check("search", spark_search(bob, "USUAL place", NULL, "alice", 5, NULL, &ids, &snippets, &found, &next))) return 1;
    if (found == 0) return fprintf(stderr, "c-chat: bob's search found nothing\n"), 1;
    printf("bob found: %s\n", snippets[0]);
    spark_strings_free(ids, found);
    spark_strings_free(snippets, found);
    spark_free(next);
    if (spark_search(bob, "lu*", NULL, NULL, 5, NULL, &ids, &snippets, &found, &next) != SPARK_ERR_INVALID_ARGUMENT)
        return fprintf(stderr, "c-chat: a two-letter prefix was not refused\n"), 1;
    printf("bob's short prefix: %s\n", spark_last_error());

    /* A file: alice sends it (with progress), bob saves it. */
    char original[4096], saved[4096];
    snprintf(original, sizeof original, "%s/notes.txt", directory);
    snprintf(saved, sizeof saved, "%s/bob-notes.txt", directory);
    FILE *file = fopen(original, "w");
    if (!file) return fprintf(stderr, "c-chat: cannot write %s\n", original), 1;
    for (int line = 0; line < 20000; line++) fprintf(file, "line %d of the notes\n", line);
    fclose(file);
    spark_message *sent_file;
    if (check("send file", spark_send_file(alice, chat_id, original, "the notes", progress, "alice sent the file", &sent_file)))
        return 1;
    spark_event *file_event = wait_for(bob, SPARK_EVENT_MESSAGE, sent_file->message_id, -1);
    if (!file_event || !file_event->message->attachment) {
        fprintf(stderr, "c-chat: bob got no file\n");
        return 1;
    }
    printf("bob got %s (%s, %lld bytes): %s\n", file_event->message->attachment->file_name,
           file_event->message->attachment->media_type, (long long)file_event->message->attachment->size,
           file_event->message->content);
    if (check("save", spark_save_attachment(bob, sent_file->message_id, saved, progress, "bob saved the file"))) return 1;
    spark_event_free(file_event);
    if (!same_file(original, saved)) return fprintf(stderr, "c-chat: the saved file differs\n"), 1;
    printf("bob's copy is the same file\n");

    /* Alice recalls the file's message: bob's copy of the message loses it. */
    if (check("recall", spark_recall(alice, sent_file->message_id))) return 1;
    spark_event *recalled = wait_for(bob, SPARK_EVENT_MESSAGES_CHANGED, sent_file->message_id, -1);
    spark_message *gone;
    if (!recalled || check("get recalled", spark_get_message(bob, sent_file->message_id, &gone))) return 1;
    printf("bob sees the file %s\n", gone->is_recalled && !gone->attachment ? "recalled" : "still there");
    spark_messages_free(gone, 1);
    spark_event_free(recalled);
    spark_messages_free(sent_file, 1);

    /* Typing and a live chat event reach the other side, and are never stored. */
    if (check("typing", spark_send_typing(bob, chat_id, 1))) return 1;
    spark_event *typing = wait_for(alice, SPARK_EVENT_TYPING, NULL, 1);
    if (!typing) return fprintf(stderr, "c-chat: alice never saw bob typing\n"), 1;
    printf("alice sees %s typing\n", typing->user_id);
    spark_event_free(typing);
    if (check("chat event", spark_send_chat_event(alice, chat_id, "cursor", "{\"x\": 3}"))) return 1;
    spark_event *live = wait_for(bob, SPARK_EVENT_CHAT_EVENT, NULL, -1);
    if (!live) return fprintf(stderr, "c-chat: bob never got the chat event\n"), 1;
    printf("bob got the live event %s %s from %s\n", live->text, live->data, live->user_id);
    spark_event_free(live);

    /* Two messages queued (each returned once stored) reach bob in the order alice sent them. */
    spark_message *first, *second;
    if (check("queue", spark_queue(alice, chat_id, "queued first", &first))) return 1;
    if (check("queue", spark_queue(alice, chat_id, "queued second", &second))) return 1;
    spark_event *queued = wait_for(bob, SPARK_EVENT_MESSAGE, second->message_id, -1);
    if (!queued) return fprintf(stderr, "c-chat: bob never got the queued messages\n"), 1;
    spark_event_free(queued);
    spark_message *latest;
    size_t latest_count;
    if (check("latest", spark_list_messages(bob, chat_id, 0, 2, &latest, &latest_count))) return 1;
    int in_order = latest_count == 2 && strcmp(latest[0].content, "queued first") == 0 &&
                   strcmp(latest[1].content, "queued second") == 0 && latest[0].number < latest[1].number;
    printf("bob got the queued messages in order: %s\n", in_order ? "yes" : "no");
    spark_messages_free(latest, latest_count);
    spark_messages_free(first, 1);
    spark_messages_free(second, 1);

    /* Three queued in one call: stored together, posted together, and bob gets them in order. */
    const char *batch[] = {"batch one", "batch two", "batch three"};
    spark_message *queued_many;
    if (check("queue many", spark_queue_many(alice, chat_id, batch, 3, &queued_many))) return 1;
    spark_event *last_of_batch = wait_for(bob, SPARK_EVENT_MESSAGE, queued_many[2].message_id, -1);
    if (!last_of_batch) return fprintf(stderr, "c-chat: bob never got the batch\n"), 1;
    spark_event_free(last_of_batch);
    if (check("latest", spark_list_messages(bob, chat_id, 0, 3, &latest, &latest_count))) return 1;
    int batch_in_order = latest_count == 3;
    for (size_t index = 0; batch_in_order && index < 3; index++) {
        batch_in_order = strcmp(latest[index].content, batch[index]) == 0 &&
                         strcmp(latest[index].message_id, queued_many[index].message_id) == 0 &&
                         (index == 0 || latest[index - 1].number < latest[index].number);
    }
    printf("bob got the batch in order: %s\n", batch_in_order ? "yes" : "no");
    spark_messages_free(latest, latest_count);
    spark_messages_free(queued_many, 3);

    /* Bob blocks alice, lists his blocks, and unblocks her. */
    if (check("block", spark_block(bob, "alice"))) return 1;
    char **blocked;
    size_t blocked_count;
    if (check("blocked", spark_blocked_users(bob, &blocked, &blocked_count))) return 1;
    printf("bob blocked %zu user(s): %s\n", blocked_count, blocked_count ? blocked[0] : "");
    spark_strings_free(blocked, blocked_count);
    return check("unblock", spark_unblock(bob, "alice"));
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
    printf("bob has %zu chat(s): %s with %s, %s\n", count, chats[0].subject, chats[0].participants,
           chats[0].post_quantum ? "post-quantum" : "classic");
    spark_chats_free(chats, count);

    char *number;
    if (check("safety number", spark_safety_number(alice, "bob", &number))) return 1;
    printf("alice and bob compare %s\n", number);
    spark_free(number);

    if (rich(alice, bob, chat_id, sent->message_id, argv[2])) return 1;

    spark_messages_free(sent, 1);
    spark_free(chat_id);
    spark_client_close(alice);
    spark_client_close(bob);
    printf("done\n");
    return 0;
}
