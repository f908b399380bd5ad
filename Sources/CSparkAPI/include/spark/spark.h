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
 * Conventions, for every function:
 *
 * - Strings are UTF-8 and NUL-terminated, in and out.
 * - A function that can fail returns a spark_status. On failure it sets nothing through its out
 *   parameters, and spark_last_error() gives a message for people (valid on the calling thread
 *   until its next call into this library). SPARK_OK is 0.
 * - Ownership: what a function returns through an out parameter belongs to the caller, who frees
 *   it with the matching function: spark_free() for strings, spark_chats_free(),
 *   spark_messages_free(), spark_event_free(). Nothing the caller passes in is kept: the library
 *   copies what it needs before the call returns.
 * - Threading: a spark_client may be used from any thread, by several threads at once. Calls
 *   block their thread until they are done (a network round trip at most, or setup's whole
 *   course for spark_complete_setup). Callbacks run on a thread of the library's own, one at a
 *   time; a callback may call back into the library (an echo bot answers from its event
 *   callback), but must not close the client.
 * - Handles are opaque. A client must be closed once, and not used after.
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

/* Stops the service and frees the client. Waits for a callback that is running to return. */
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
     * Write the passcode, NUL-terminated, into `buffer` (of `size` bytes) and return 1; return 0
     * to stop setup. */
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
} spark_chat;

typedef enum {
    SPARK_MESSAGE_SENDING = 0,
    SPARK_MESSAGE_SENT = 1,
    SPARK_MESSAGE_DELIVERED = 2,
    SPARK_MESSAGE_READ = 3,
    SPARK_MESSAGE_FAILED = 4,
    SPARK_MESSAGE_HELD = 5
} spark_message_state;

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
    int is_recalled;
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

/* Up to `limit` messages of a chat before `before_number` (0: the newest), oldest first. */
spark_status spark_list_messages(
    spark_client *client, const char *chat_id, int64_t before_number, size_t limit, spark_message **messages,
    size_t *count);
void spark_messages_free(spark_message *messages, size_t count);

/* Marks the chat's messages read (the senders see it). */
spark_status spark_mark_read(spark_client *client, const char *chat_id);

/* Changes the text of a message this user sent. */
spark_status spark_edit(spark_client *client, const char *message_id, const char *text);

/* The safety number this user and `user_id` compare (60 digits in 12 groups of 5, spaced; free
 * with spark_free). */
spark_status spark_safety_number(spark_client *client, const char *user_id, char **number);

/* ------------------------------------------------------------------------------------------ */
/* Events                                                                                      */

typedef enum {
    /* A message arrived from another user (`message` set). */
    SPARK_EVENT_MESSAGE = 1,
    /* One of this user's messages moved: sent, delivered, read, failed (`message_id`, `state`,
     * `chat_id`; `text` holds a failure's reason). */
    SPARK_EVENT_MESSAGE_STATE = 2,
    /* A user is typing in a chat, or stopped (`user_id`, `chat_id`, `state` 1 or 0). */
    SPARK_EVENT_TYPING = 3,
    /* Anything else the app may show (an identity change, a dropped forgery): `text` says it. */
    SPARK_EVENT_NOTICE = 4
} spark_event_kind;

typedef struct {
    spark_event_kind kind;
    char *chat_id;
    char *message_id;
    char *user_id;
    int state;
    char *text;
    /* For SPARK_EVENT_MESSAGE: the message (one). */
    spark_message *message;
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
