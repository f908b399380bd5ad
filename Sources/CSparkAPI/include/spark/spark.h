/*
 * spark/spark.h: the Spark SDK for C (libsparksdk.so).
 *
 * End-to-end encrypted chat for any Linux app: sign in, set the device up, start chats, send and
 * read messages, follow events from an event loop. Every chat is an MLS group of devices; the
 * domain (embedded file or spark-domaind) sees ciphertext only.
 *
 *   spark_client *client;
 *   if (spark_client_open("ConfigSettings.plist", "/var/lib/myapp/alice", &client) != SPARK_OK) {
 *       fprintf(stderr, "%s\n", spark_last_error());
 *       return 1;
 *   }
 *   spark_sign_in_test(client, "alice");
 *   spark_setup_handlers handlers = {.passcode = ask_passcode};
 *   spark_complete_setup(client, &handlers);
 *   char *chat_id;
 *   const char *people[] = {"bob"};
 *   spark_start_chat(client, people, 1, "Lunch", &chat_id);
 *   spark_send(client, chat_id, "12:30?", NULL);
 *   spark_free(chat_id);
 *   spark_client_close(client);
 *
 * Rich messaging works the same way: reactions (spark_react), recall (spark_recall), files
 * (spark_send_file, spark_save_attachment), typing and live chat events (spark_send_typing,
 * spark_send_chat_event), disappearing messages (spark_set_disappearing_timer), blocking
 * (spark_block) and reports (spark_report).
 *
 * Conventions, for every function:
 *
 * - Strings are UTF-8 and NUL-terminated, in and out.
 * - A function that can fail returns a spark_status. On failure it sets nothing through its out
 *   parameters, and spark_last_error() gives a message for people (valid on the calling thread
 *   until its next call into this library). SPARK_OK is 0.
 * - Ownership: what a function returns through an out parameter belongs to the caller, who frees
 *   it with the matching function: spark_free() for strings and bytes, spark_chats_free(),
 *   spark_messages_free(), spark_event_free(), spark_strings_free(). Nothing the caller passes in
 *   is kept: the library copies what it needs before the call returns.
 * - Threading: a spark_client may be used from any thread, by several threads at once. Calls
 *   block their thread until they are done (a network round trip at most, or setup's whole
 *   course for spark_complete_setup). Callbacks run on a thread of the library's own, one at a
 *   time; a callback may call back into the library (an echo bot answers from its event
 *   callback), but must not close the client.
 * - Handles are opaque. A client must be closed once, and not used after.
 * - NULL: every function that frees (spark_free, spark_chats_free, spark_messages_free,
 *   spark_strings_free, spark_event_free) and spark_client_close ignore NULL. Elsewhere a NULL
 *   argument is SPARK_ERR_INVALID_ARGUMENT unless the function's comment allows it.
 * - Restarts: a device set up once stays signed in and set up. After spark_client_open,
 *   spark_is_set_up returns 1 and messaging works with no sign-in (the credentials and keys are
 *   in the data directory; the passcode is not asked again). Sign in only when it returns 0. With
 *   the custom provider call spark_sign_in_token again after each open: the refresh callback is
 *   not kept across processes, and without it the stored token ends the session when it expires.
 */
#ifndef SPARK_SPARK_H
#define SPARK_SPARK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                      */

/* What a call returns. New codes may be added: treat an unknown one as SPARK_ERR_INTERNAL. */
typedef enum {
    SPARK_OK = 0,
    /* An argument is NULL where it may not be, not UTF-8, or out of range. */
    SPARK_ERR_INVALID_ARGUMENT = 1,
    /* The configuration file is missing, unreadable or wrong (the message names the key). */
    SPARK_ERR_CONFIG = 2,
    /* Signing in failed: a wrong provider for the call, a refused token or credentials. */
    SPARK_ERR_AUTH = 3,
    /* Setup failed or was cancelled (a passcode callback returned no answer). */
    SPARK_ERR_SETUP = 4,
    /* The client is not set up yet (call spark_complete_setup first). */
    SPARK_ERR_NOT_READY = 5,
    /* The domain refused the call (the message says why: a timeout, a ban, a size). */
    SPARK_ERR_REFUSED = 6,
    /* No such chat or message on this device. */
    SPARK_ERR_NOT_FOUND = 7,
    /* This device's store failed. */
    SPARK_ERR_STORAGE = 8,
    /* The domain cannot be reached now; try again later. */
    SPARK_ERR_UNAVAILABLE = 9,
    /* A participant's identity changed and is not confirmed: the message is held. */
    SPARK_ERR_IDENTITY_UNCONFIRMED = 10,
    /* Anything else. */
    SPARK_ERR_INTERNAL = 99
} spark_status;

/* The message of the last call on this thread that failed (never NULL; "" when none failed).
 * Owned by the library: valid until this thread's next call into it. */
const char *spark_last_error(void);

/* A short name for a status ("SPARK_ERR_REFUSED"); owned by the library, never freed. */
const char *spark_status_name(spark_status status);

/* The library's version ("1.0.0"); owned by the library. */
const char *spark_version(void);

/* Frees a string the library returned. NULL is ignored. */
void spark_free(void *pointer);

/* ------------------------------------------------------------------------------------------ */
/* The client                                                                                  */

typedef struct spark_client spark_client;

/* Opens a client from a ConfigSettings.plist (docs in the README: the auth provider, the
 * domain, the data directory) with this device's data in `data_directory` (NULL: the plist's
 * dataDirectory), and starts its service. */
spark_status spark_client_open(const char *config_path, const char *data_directory, spark_client **client);

/* Stops the service and frees the client. Waits for a callback that is running to return, not
 * for outgoing work: every spark_send has returned by then with the message taken by the domain
 * or stored as held (SPARK_ERR_IDENTITY_UNCONFIRMED, or waiting to retry), and a held message
 * stays in the data directory and goes out after a later spark_client_open. NULL is ignored. */
void spark_client_close(spark_client *client);

/* ------------------------------------------------------------------------------------------ */
/* Signing in: one call per provider (authProvider in the plist)                              */

/* testAuth: signs in as `user_id` (a sandbox domain accepts any). */
spark_status spark_sign_in_test(spark_client *client, const char *user_id);

/* accounts: logs in with the domain's sign-up assistant's user name and password. */
spark_status spark_log_in(spark_client *client, const char *user_name, const char *password);

/* custom: the app's own JWT. Later tokens come from `refresh`, called on the library's thread
 * when a token runs out: it returns a new token the library frees with free() (malloc'd), or
 * NULL when there is none (the user must sign in again). `context` is passed back. */
typedef char *(*spark_token_refresh)(void *context);
spark_status spark_sign_in_token(spark_client *client, const char *jwt, spark_token_refresh refresh, void *context);

/* oidc: signs in through the organisation's OpenID provider, with the flow the plist names
 * (oidc.flow: browser, or device for a code entered on another device). `prompt` is called once,
 * on the library's thread, with what to show the user: the `url` to open and, for the device
 * flow, the `user_code` to enter there (NULL for the browser flow, whose redirect comes back to
 * a loopback address this call listens on). NULL `prompt`: the URL and code are printed on
 * standard error (and the browser opened with xdg-open where there is a display). Returns once
 * the user signed in: SPARK_ERR_AUTH when the provider refused, a check of what it returned
 * failed, or nobody signed in within five minutes. */
typedef void (*spark_oidc_prompt)(void *context, const char *url, const char *user_code);
spark_status spark_sign_in_oidc(spark_client *client, spark_oidc_prompt prompt, void *context);

/* Signs out. With `wipe_keys` nonzero the device's keys and messages are deleted. */
spark_status spark_sign_out(spark_client *client, int wipe_keys);

/* ------------------------------------------------------------------------------------------ */
/* Setup                                                                                       */

/* One of the user's devices (for the device-switch and full-list callbacks). */
typedef struct {
    const char *endpoint_id;
    const char *description;
    const char *nickname;
    int64_t registration_id;
    int is_active;
} spark_endpoint;

/* What setup asks a person. Each callback runs on the library's thread and may block (to ask at
 * a terminal). NULL callbacks answer "no": setup then stops with SPARK_ERR_SETUP. */
typedef struct {
    /* A passcode: `is_new` is 1 on the user's first device (choose one), 0 on a later one (the
     * one chosen then). `problem` is NULL the first time, else why the last answer was refused.
     * Write the passcode, NUL-terminated, into `buffer` (of `size` bytes: 1,024, so a passcode
     * is at most 1,023 bytes of UTF-8) and return 1; return 0 to stop setup. */
    int (*passcode)(void *context, int is_new, const char *problem, char *buffer, size_t size);
    /* The user's other device is active and this domain allows one: return 1 to take the
     * profile over (the other device is signed out), 0 to stop. */
    int (*confirm_device_switch)(void *context, const spark_endpoint *active, size_t count);
    /* The user has as many devices as the domain allows: return the index of the one to remove,
     * or -1 to stop. */
    int (*endpoint_to_remove)(void *context, const spark_endpoint *endpoints, size_t count);
    /* Passed back to each callback. */
    void *context;
} spark_setup_handlers;

/* Drives setup to success after a sign-in, asking `handlers` when a person must answer. */
spark_status spark_complete_setup(spark_client *client, const spark_setup_handlers *handlers);

/* Where setup stands: 1 when it succeeded (messaging works), 0 otherwise; `state`, if not NULL,
 * gets its name ("Success", "SyncRequired", "Ongoing", …; free with spark_free). */
int spark_is_set_up(spark_client *client, char **state);

/* Whether the domain answered lately: 1 connected, 0 not (or not known yet). */
int spark_is_connected(spark_client *client);

/* ------------------------------------------------------------------------------------------ */
/* Chats and messages                                                                          */

typedef struct {
    char *chat_id;
    char *subject;
    /* The participants' user ids, joined by ',' (this user included). */
    char *participants;
    int64_t unread_count;
    int is_active;
    /* 1 when the chat is post-quantum (its MLS group runs the X-Wing suite), 0 when classic. */
    int post_quantum;
} spark_chat;

typedef enum {
    SPARK_MESSAGE_SENDING = 0,
    SPARK_MESSAGE_SENT = 1,
    SPARK_MESSAGE_DELIVERED = 2,
    SPARK_MESSAGE_READ = 3,
    SPARK_MESSAGE_FAILED = 4,
    SPARK_MESSAGE_HELD = 5
} spark_message_state;

/* One emoji on a message and the users who reacted with it. */
typedef struct {
    char *emoji;
    /* The users' ids, joined by ','. */
    char *user_ids;
    size_t count;
} spark_reaction;

/* A file a message carries (its bytes stay on the domain, encrypted, until spark_save_attachment). */
typedef struct {
    char *file_name;
    /* Such as "image/png". */
    char *media_type;
    /* The file's size in bytes. */
    int64_t size;
    /* 1 when a thumbnail came with it (spark_thumbnail). */
    int has_thumbnail;
} spark_attachment;

typedef struct {
    char *message_id;
    char *chat_id;
    /* The chat-wide number the domain gave it, 0 while sending. */
    int64_t number;
    char *sender;
    int is_incoming;
    char *content;
    char *tag;
    /* The app's data (JSON), or NULL. */
    char *data;
    spark_message_state state;
    /* Milliseconds since 1970. */
    int64_t timestamp_ms;
    /* 1 when its sender recalled it: the content is gone everywhere. */
    int is_recalled;
    /* The reactions, `reaction_count` of them (NULL when none). */
    spark_reaction *reactions;
    size_t reaction_count;
    /* The file it carries, or NULL. */
    spark_attachment *attachment;
    /* When its content is deleted on every device (a disappearing message), in milliseconds
     * since 1970; 0 when it is kept. */
    int64_t expires_at_ms;
} spark_message;

/* Every chat of this device, most recently active first: `*chats` gets an array of `*count`
 * (free with spark_chats_free). */
spark_status spark_list_chats(spark_client *client, spark_chat **chats, size_t *count);
void spark_chats_free(spark_chat *chats, size_t count);

/* Starts a chat with `count` users (one: one-to-one) and a subject (NULL or ""); `*chat_id`
 * gets its id (free with spark_free). */
spark_status spark_start_chat(
    spark_client *client, const char *const *users, size_t count, const char *subject, char **chat_id);

/* Sends `text` to a chat (at most 70 KB); `*message`, if not NULL, gets it as sent (free with
 * spark_messages_free(m, 1)). */
spark_status spark_send(spark_client *client, const char *chat_id, const char *text, spark_message **message);

/* Sends `text` to a chat without waiting for the domain: returns once the message is sealed and
 * stored on this device (state SPARK_MESSAGE_SENDING, or held), as spark_send does before it
 * posts. The chat's messages are posted in the order they were sent, several in one request
 * while one is in flight; each one's later states come as SPARK_EVENT_MESSAGE_STATE events.
 * `*message`, if not NULL, gets it as stored (free with spark_messages_free(m, 1)). */
spark_status spark_queue(spark_client *client, const char *chat_id, const char *text, spark_message **message);

/* Sends `count` texts (1 to 256, each at most 70 KB) to a chat at once, in their order, without
 * waiting for the domain: spark_queue for each, in one step. They are sealed and stored on this
 * device in one transaction (all of them or, when it fails, none) and posted together. `*messages`,
 * if not NULL, gets them as stored, in that order (free with spark_messages_free(m, count)). */
spark_status spark_queue_many(
    spark_client *client, const char *chat_id, const char *const *texts, size_t count, spark_message **messages);

/* Up to `limit` messages of a chat before `before_number` (0: the newest), oldest first. */
spark_status spark_list_messages(
    spark_client *client, const char *chat_id, int64_t before_number, size_t limit, spark_message **messages,
    size_t *count);
void spark_messages_free(spark_message *messages, size_t count);

/* One message by its id (`*message`: free with spark_messages_free(m, 1)); SPARK_ERR_NOT_FOUND
 * when this device has none. */
spark_status spark_get_message(spark_client *client, const char *message_id, spark_message **message);

/* Searches this device's messages for every word of `query` (a prefix as `lunch*`, a phrase in
 * double quotes, text of scripts without spaces as a substring; case and diacritics do not
 * count; see docs/SEARCH.md). `chat_id` and `sender` narrow it (NULL: any). Up to `limit` (1 to
 * 100) results, best first: `*message_ids` and `*snippets` get `*count` strings each (free each
 * with spark_strings_free); a snippet is where the message matched, each match between [ and ].
 * `cursor` is NULL for the first page, else the `*next` of the page before; `*next` gets the next
 * page's cursor, or NULL after the last (free with spark_free). A query with nothing to look for,
 * a prefix shorter than three letters, or text that is not UTF-8 is SPARK_ERR_INVALID_ARGUMENT. */
spark_status spark_search(
    spark_client *client, const char *query, const char *chat_id, const char *sender, size_t limit, const char *cursor,
    char ***message_ids, char ***snippets, size_t *count, char **next);

/* Marks the chat's messages read (the senders see it). */
spark_status spark_mark_read(spark_client *client, const char *chat_id);

/* Changes the text of a message this user sent. */
spark_status spark_edit(spark_client *client, const char *message_id, const char *text);

/* Adds this user's `emoji` (1 to 64 bytes, one per user per emoji) to a message. */
spark_status spark_react(spark_client *client, const char *message_id, const char *emoji);

/* Takes this user's `emoji` off a message. */
spark_status spark_remove_reaction(spark_client *client, const char *message_id, const char *emoji);

/* Recalls (deletes for everyone) a message this user sent: every device of every member deletes
 * its content and its file, and shows it as recalled. */
spark_status spark_recall(spark_client *client, const char *message_id);

/* Sets the chat's disappearing-message timer: each message's content is deleted `seconds` after
 * it was sent (by its sender's devices) or read (by the others'). 0 turns it off. */
spark_status spark_set_disappearing_timer(spark_client *client, const char *chat_id, int64_t seconds);

/* Tells the chat's online members this user is typing (`is_typing` 1; call it as they type, a
 * notice goes at most every 3 seconds) or stopped (0). Never stored. */
spark_status spark_send_typing(spark_client *client, const char *chat_id, int is_typing);

/* Sends an app-defined live event to the chat's online members (SPARK_EVENT_CHAT_EVENT): `tag`
 * names it (1 to 64 bytes), `data` (NULL, or at most 8 KB) carries it. Never stored. */
spark_status spark_send_chat_event(spark_client *client, const char *chat_id, const char *tag, const char *data);

/* A transfer's progress: `done` of `total` bytes. Called on the thread that called
 * spark_send_file or spark_save_attachment, during that call, whenever a part has moved; it must
 * not call into the library. */
typedef void (*spark_progress)(void *context, int64_t done, int64_t total);

/* Sends the file at `path` to a chat with a `caption` (NULL or ""): encrypted on this device as it
 * is read (AES-256-GCM in 64 KiB chunks under a key of its own), uploaded in parts (a lost
 * connection resumes), then announced in a message. Blocks until the message is sent. The domain
 * caps a file's size (100 MiB by default). `progress` may be NULL; `*message`, if not NULL, gets
 * the message (free with spark_messages_free(m, 1)). */
spark_status spark_send_file(
    spark_client *client, const char *chat_id, const char *path, const char *caption, spark_progress progress,
    void *context, spark_message **message);

/* Saves a message's file at `path`: downloaded and decrypted into a hidden file beside it, which
 * replaces `path` only once every chunk and the whole file's digest checked (a swapped or cut
 * file is refused with SPARK_ERR_REFUSED, and nothing is left). Blocks until done. */
spark_status spark_save_attachment(
    spark_client *client, const char *message_id, const char *path, spark_progress progress, void *context);

/* The thumbnail of a message's file: `*bytes` gets `*size` bytes (free with spark_free), or NULL
 * and 0 when none came with it. */
spark_status spark_thumbnail(spark_client *client, const char *message_id, uint8_t **bytes, size_t *size);

/* Blocks a user: every device of this user drops what they send from now on, in every chat, and
 * their invitations; the domain refuses their new chats with this user. */
spark_status spark_block(spark_client *client, const char *user_id);

/* Unblocks a user. */
spark_status spark_unblock(spark_client *client, const char *user_id);

/* The users this user blocked: `*users` gets an array of `*count` strings (free with
 * spark_strings_free). */
spark_status spark_blocked_users(spark_client *client, char ***users, size_t *count);
void spark_strings_free(char **strings, size_t count);

/* Reports `user_id`, a participant of the chat, to the domain's operator with `reason`, revealing
 * the `count` (1 to 50) messages `message_ids` of theirs from this chat: the operator reads their
 * text. `*report_id`, if not NULL, gets the report's number. */
spark_status spark_report(
    spark_client *client, const char *chat_id, const char *user_id, const char *const *message_ids, size_t count,
    const char *reason, int64_t *report_id);

/* Checks the domain's key-transparency log now (as the device does every hour): this user's own
 * identity and every contact's. `alarm` is set to the alarm raised (free with spark_free), or
 * NULL when none is. */
spark_status spark_check_transparency(spark_client *client, char **alarm);

/* The safety number this user and `user_id` compare (60 digits in 12 groups of 5, spaced; free
 * with spark_free). */
spark_status spark_safety_number(spark_client *client, const char *user_id, char **number);

/* ------------------------------------------------------------------------------------------ */
/* Events                                                                                      */

typedef enum {
    /* A message arrived from another user: `message` set, and `chat_id`, `message_id` and
     * `user_id` (its sender) filled as in it. */
    SPARK_EVENT_MESSAGE = 1,
    /* One of this user's messages moved: sent, delivered, read, failed (`message_id`, `chat_id`,
     * and `state`, a spark_message_state value; `text` holds a failure's reason). */
    SPARK_EVENT_MESSAGE_STATE = 2,
    /* A user is typing in a chat, or stopped (`user_id`, `chat_id`, `state` 1 or 0). */
    SPARK_EVENT_TYPING = 3,
    /* Anything else the app may show (an identity change, a dropped forgery): `text` says it. */
    SPARK_EVENT_NOTICE = 4,
    /* An app-defined live event (spark_send_chat_event) from `user_id` in `chat_id`: `text` is
     * its tag, `data` its data (or NULL). */
    SPARK_EVENT_CHAT_EVENT = 5,
    /* Messages of `chat_id` changed after they arrived (an edit, a reaction, a recall, an expiry;
     * a step of this user's own message is SPARK_EVENT_MESSAGE_STATE): `message_id` names the
     * one, or is NULL when any may have. Read it again with spark_get_message. */
    SPARK_EVENT_MESSAGES_CHANGED = 6,
    /* Key transparency: the domain's log did not prove the key it gives for contact `user_id`
     * (held as changed), or, with `user_id` NULL, this user's own identity or the log's heads
     * raised the alarm (a version no device of the user published, a fork). `text` says why. */
    SPARK_EVENT_TRANSPARENCY = 7
} spark_event_kind;

typedef struct {
    spark_event_kind kind;
    char *chat_id;
    char *message_id;
    char *user_id;
    /* SPARK_EVENT_MESSAGE_STATE: a spark_message_state value (SPARK_MESSAGE_SENT, …);
     * SPARK_EVENT_TYPING: 1 typing, 0 stopped; 0 otherwise. */
    int state;
    char *text;
    /* For SPARK_EVENT_MESSAGE: the message (one). */
    spark_message *message;
    /* For SPARK_EVENT_CHAT_EVENT: the event's data, or NULL. */
    char *data;
} spark_event;

/* A file descriptor that is readable while events wait: add it to an event loop (GLib's,
 * libuv's, epoll) and call spark_next_event until it returns SPARK_OK with NULL. Owned by the
 * client (do not close it). */
int spark_event_fd(spark_client *client);

/* The next event, or NULL in `*event` when none waits (free with spark_event_free). */
spark_status spark_next_event(spark_client *client, spark_event **event);
void spark_event_free(spark_event *event);

/* Or: every event to `callback`, on the library's thread, instead of the queue (NULL turns it
 * back to the queue). The event is the library's: valid during the call only. */
typedef void (*spark_event_callback)(void *context, const spark_event *event);
spark_status spark_set_event_callback(spark_client *client, spark_event_callback callback, void *context);

#ifdef __cplusplus
}
#endif

#endif
