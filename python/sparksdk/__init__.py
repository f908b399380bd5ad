"""Spark SDK for Python: end-to-end encrypted chat over libsparksdk (the C API, spark/spark.h).

Every call blocks its thread until it is done (a network round trip at most; setup's whole
course for complete_setup), as the C calls do. A failed call raises SparkError with the C status
and the library's message. Events come from events() (an iterator that waits on the client's
event descriptor) or async_events() (an asyncio async iterator over the same descriptor).
"""

from __future__ import annotations

import asyncio
import ctypes
import enum
import os
import select
import shutil
import subprocess
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterator, List, Optional, Sequence, Union

__all__ = [
    "Attachment", "Chat", "Client", "Event", "EventKind", "Message", "MessageState", "Reaction", "SearchPage",
    "SearchResult", "SparkError", "Status",
    "library_path",
]


class Status(enum.IntEnum):
    """A C call's status (spark_status)."""

    OK = 0
    INVALID_ARGUMENT = 1
    CONFIG = 2
    AUTH = 3
    SETUP = 4
    NOT_READY = 5
    REFUSED = 6
    NOT_FOUND = 7
    STORAGE = 8
    UNAVAILABLE = 9
    IDENTITY_UNCONFIRMED = 10
    INTERNAL = 99


class MessageState(enum.IntEnum):
    """Where a message is in its life (spark_message_state)."""

    SENDING = 0
    SENT = 1
    DELIVERED = 2
    READ = 3
    FAILED = 4
    HELD = 5


class EventKind(enum.IntEnum):
    """What an event is about (spark_event_kind)."""

    MESSAGE = 1
    MESSAGE_STATE = 2
    TYPING = 3
    NOTICE = 4
    CHAT_EVENT = 5
    MESSAGES_CHANGED = 6
    TRANSPARENCY = 7


class SparkError(Exception):
    """A call the library refused or failed: `status` says which kind, the message why."""

    def __init__(self, status: int, message: str):
        try:
            self.status: Union[Status, int] = Status(status)
        except ValueError:
            self.status = status
        super().__init__(f"{message} ({getattr(self.status, 'name', status)})")


@dataclass(frozen=True)
class SearchResult:
    """A message a search found: its id (Client.message) and where it matched, between [ and ]."""

    message_id: str
    snippet: str


@dataclass(frozen=True)
class SearchPage:
    """A page of search results, best first, and the cursor of the next (None after the last)."""

    results: List[SearchResult]
    next: Optional[str]


@dataclass(frozen=True)
class Reaction:
    """One emoji on a message and the users who reacted with it."""

    emoji: str
    user_ids: List[str]


@dataclass(frozen=True)
class Attachment:
    """A file a message carries (save it with Client.save_attachment)."""

    file_name: str
    media_type: str
    size: int
    has_thumbnail: bool


@dataclass(frozen=True)
class Message:
    message_id: str
    chat_id: str
    number: int
    sender: str
    is_incoming: bool
    content: str
    tag: str
    data: Optional[str]
    state: MessageState
    timestamp_ms: int
    is_recalled: bool
    reactions: List[Reaction]
    attachment: Optional[Attachment]
    # When its content is deleted everywhere (milliseconds since 1970), or 0.
    expires_at_ms: int


@dataclass(frozen=True)
class Chat:
    chat_id: str
    subject: str
    participants: List[str]
    unread_count: int
    is_active: bool
    # Whether the chat is post-quantum (its MLS group runs the X-Wing suite).
    post_quantum: bool


@dataclass(frozen=True)
class Event:
    kind: EventKind
    chat_id: Optional[str]
    message_id: Optional[str]
    user_id: Optional[str]
    state: int
    text: Optional[str]
    message: Optional[Message]
    # For CHAT_EVENT: its data (its tag is `text`).
    data: Optional[str]


# The C structs, as spark.h declares them.
class _CReaction(ctypes.Structure):
    _fields_ = [("emoji", ctypes.c_char_p), ("user_ids", ctypes.c_char_p), ("count", ctypes.c_size_t)]


class _CAttachment(ctypes.Structure):
    _fields_ = [
        ("file_name", ctypes.c_char_p), ("media_type", ctypes.c_char_p), ("size", ctypes.c_int64),
        ("has_thumbnail", ctypes.c_int),
    ]


class _CMessage(ctypes.Structure):
    _fields_ = [
        ("message_id", ctypes.c_char_p), ("chat_id", ctypes.c_char_p), ("number", ctypes.c_int64),
        ("sender", ctypes.c_char_p), ("is_incoming", ctypes.c_int), ("content", ctypes.c_char_p),
        ("tag", ctypes.c_char_p), ("data", ctypes.c_char_p), ("state", ctypes.c_int),
        ("timestamp_ms", ctypes.c_int64), ("is_recalled", ctypes.c_int),
        ("reactions", ctypes.POINTER(_CReaction)), ("reaction_count", ctypes.c_size_t),
        ("attachment", ctypes.POINTER(_CAttachment)), ("expires_at_ms", ctypes.c_int64),
    ]


class _CChat(ctypes.Structure):
    _fields_ = [
        ("chat_id", ctypes.c_char_p), ("subject", ctypes.c_char_p), ("participants", ctypes.c_char_p),
        ("unread_count", ctypes.c_int64), ("is_active", ctypes.c_int), ("post_quantum", ctypes.c_int),
    ]


class _CEvent(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int), ("chat_id", ctypes.c_char_p), ("message_id", ctypes.c_char_p),
        ("user_id", ctypes.c_char_p), ("state", ctypes.c_int), ("text", ctypes.c_char_p),
        ("message", ctypes.POINTER(_CMessage)), ("data", ctypes.c_char_p),
    ]


class _CEndpoint(ctypes.Structure):
    _fields_ = [
        ("endpoint_id", ctypes.c_char_p), ("description", ctypes.c_char_p), ("nickname", ctypes.c_char_p),
        ("registration_id", ctypes.c_int64), ("is_active", ctypes.c_int),
    ]


_PASSCODE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
_CONFIRM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_CEndpoint), ctypes.c_size_t)
_REMOVE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_CEndpoint), ctypes.c_size_t)
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_OIDC_PROMPT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class _CHandlers(ctypes.Structure):
    _fields_ = [("passcode", _PASSCODE), ("confirm_device_switch", _CONFIRM), ("endpoint_to_remove", _REMOVE),
                ("context", ctypes.c_void_p)]


def library_path() -> str:
    """Where libsparksdk.so is: SPARKSDK_LIBRARY, else pkg-config's libdir, else the system's."""
    explicit = os.environ.get("SPARKSDK_LIBRARY")
    if explicit:
        return explicit
    if shutil.which("pkg-config"):
        found = subprocess.run(["pkg-config", "--variable=libdir", "sparksdk"], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip():
            return os.path.join(found.stdout.strip(), "libsparksdk.so")
    return "libsparksdk.so"


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    P, S, I64, SZ, I = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_size_t, ctypes.c_int
    out_s = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "spark_last_error": ([], S), "spark_version": ([], S), "spark_free": ([P], None),
        "spark_client_open": ([S, S, ctypes.POINTER(P)], I), "spark_client_close": ([P], None),
        "spark_sign_in_test": ([P, S], I), "spark_sign_in_oidc": ([P, _OIDC_PROMPT, P], I), "spark_log_in": ([P, S, S], I), "spark_sign_out": ([P, I], I),
        "spark_complete_setup": ([P, ctypes.POINTER(_CHandlers)], I), "spark_is_set_up": ([P, out_s], I),
        "spark_is_connected": ([P], I),
        "spark_list_chats": ([P, ctypes.POINTER(ctypes.POINTER(_CChat)), ctypes.POINTER(SZ)], I),
        "spark_chats_free": ([ctypes.POINTER(_CChat), SZ], None),
        "spark_start_chat": ([P, ctypes.POINTER(S), SZ, S, out_s], I),
        "spark_send": ([P, S, S, ctypes.POINTER(ctypes.POINTER(_CMessage))], I),
        "spark_queue": ([P, S, S, ctypes.POINTER(ctypes.POINTER(_CMessage))], I),
        "spark_queue_many": ([P, S, ctypes.POINTER(S), SZ, ctypes.POINTER(ctypes.POINTER(_CMessage))], I),
        "spark_list_messages": ([P, S, I64, SZ, ctypes.POINTER(ctypes.POINTER(_CMessage)), ctypes.POINTER(SZ)], I),
        "spark_messages_free": ([ctypes.POINTER(_CMessage), SZ], None),
        "spark_mark_read": ([P, S], I), "spark_edit": ([P, S, S], I), "spark_safety_number": ([P, S, out_s], I),
        "spark_check_transparency": ([P, out_s], I),
        "spark_event_fd": ([P], I), "spark_next_event": ([P, ctypes.POINTER(ctypes.POINTER(_CEvent))], I),
        "spark_event_free": ([ctypes.POINTER(_CEvent)], None),
        "spark_get_message": ([P, S, ctypes.POINTER(ctypes.POINTER(_CMessage))], I),
        "spark_react": ([P, S, S], I), "spark_remove_reaction": ([P, S, S], I), "spark_recall": ([P, S], I),
        "spark_set_disappearing_timer": ([P, S, I64], I), "spark_send_typing": ([P, S, I], I),
        "spark_send_chat_event": ([P, S, S, S], I),
        "spark_send_file": ([P, S, S, S, _PROGRESS, P, ctypes.POINTER(ctypes.POINTER(_CMessage))], I),
        "spark_save_attachment": ([P, S, S, _PROGRESS, P], I),
        "spark_thumbnail": ([P, S, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(SZ)], I),
        "spark_block": ([P, S], I), "spark_unblock": ([P, S], I),
        "spark_blocked_users": ([P, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)), ctypes.POINTER(SZ)], I),
        "spark_strings_free": ([ctypes.POINTER(ctypes.c_char_p), SZ], None),
        "spark_search": ([P, S, S, S, SZ, S, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                          ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)), ctypes.POINTER(SZ), ctypes.POINTER(ctypes.c_void_p)], I),
        "spark_report": ([P, S, S, ctypes.POINTER(S), SZ, S, ctypes.POINTER(I64)], I),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = arguments
        function.restype = result
    return lib


_lib: Optional[ctypes.CDLL] = None


def _library() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def _text(value: Optional[bytes]) -> Optional[str]:
    return None if value is None else value.decode("utf-8")


def _message(c: _CMessage) -> Message:
    reactions = [Reaction(_text(c.reactions[i].emoji), _text(c.reactions[i].user_ids).split(","))
                 for i in range(c.reaction_count)]
    attachment = None
    if c.attachment:
        a = c.attachment[0]
        attachment = Attachment(_text(a.file_name), _text(a.media_type), a.size, bool(a.has_thumbnail))
    return Message(
        message_id=_text(c.message_id), chat_id=_text(c.chat_id), number=c.number, sender=_text(c.sender),
        is_incoming=bool(c.is_incoming), content=_text(c.content), tag=_text(c.tag), data=_text(c.data),
        state=MessageState(c.state), timestamp_ms=c.timestamp_ms, is_recalled=bool(c.is_recalled),
        reactions=reactions, attachment=attachment, expires_at_ms=c.expires_at_ms)


def _progress(callback: Optional[Callable[[int, int], None]]):
    """A C progress callback over a Python one (called on the calling thread, during the call)."""
    return _PROGRESS(lambda _context, done, total: callback(done, total) if callback else None)


def _taken_string(pointer: ctypes.c_void_p) -> str:
    """A string the library returned, copied and freed."""
    try:
        return ctypes.string_at(pointer.value).decode("utf-8")
    finally:
        _library().spark_free(pointer)


class Client:
    """One device of one user: a spark_client. Use it as a context manager, or close() it."""

    def __init__(self, config_path: str, data_directory: Optional[str] = None):
        lib = _library()
        self._handle = ctypes.c_void_p()
        self._check(lib.spark_client_open(
            config_path.encode(), data_directory.encode() if data_directory else None, ctypes.byref(self._handle)))

    # Lifetime

    def close(self) -> None:
        """Stops the service and frees the client (again is nothing)."""
        if self._handle:
            _library().spark_client_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()

    @staticmethod
    def _check(status: int) -> None:
        if status != 0:
            raise SparkError(status, _library().spark_last_error().decode("utf-8", "replace"))

    # Signing in and setup

    def sign_in_test(self, user_id: str) -> None:
        """testAuth: signs in as `user_id` (a sandbox domain takes any)."""
        self._check(_library().spark_sign_in_test(self._handle, user_id.encode()))

    def log_in(self, user_name: str, password: str) -> None:
        """accounts: the domain's sign-up assistant's credentials."""
        self._check(_library().spark_log_in(self._handle, user_name.encode(), password.encode()))

    def sign_in_oidc(self, prompt: Optional[Callable[[str, Optional[str]], None]] = None) -> None:
        """oidc: signs in through the organisation's OpenID provider with the plist's flow.
        `prompt(url, user_code)` shows the user what to do: open `url` (and, for the device flow,
        enter `user_code` there; None for the browser flow). Without it the URL and code are
        printed on standard error. Returns once the user signed in."""
        def show(_context, url, user_code):
            if prompt is not None:
                prompt(_text(url), _text(user_code))

        callback = _OIDC_PROMPT(show) if prompt is not None else _OIDC_PROMPT()
        self._check(_library().spark_sign_in_oidc(self._handle, callback, None))

    def sign_out(self, wipe_keys: bool = False) -> None:
        self._check(_library().spark_sign_out(self._handle, 1 if wipe_keys else 0))

    def complete_setup(self, passcode: Union[str, Callable[[bool, Optional[str]], Optional[str]]],
                       confirm_device_switch: Callable[[List[str]], bool] = lambda active: False,
                       endpoint_to_remove: Callable[[List[str]], Optional[int]] = lambda endpoints: None) -> None:
        """Drives setup to success. `passcode` is the passcode, or a function of (is_new, problem)
        that returns it (None stops setup); the other two answer a device switch and a full list."""
        def ask(_context, is_new, problem, buffer, size):
            answer = passcode if isinstance(passcode, str) else passcode(bool(is_new), _text(problem))
            if answer is None or (isinstance(passcode, str) and problem is not None):
                return 0
            encoded = answer.encode()[: size - 1] + b"\0"
            ctypes.memmove(buffer, encoded, len(encoded))
            return 1

        def confirm(_context, endpoints, count):
            return 1 if confirm_device_switch([_text(endpoints[i].endpoint_id) for i in range(count)]) else 0

        def remove(_context, endpoints, count):
            index = endpoint_to_remove([_text(endpoints[i].endpoint_id) for i in range(count)])
            return -1 if index is None else index

        handlers = _CHandlers(_PASSCODE(ask), _CONFIRM(confirm), _REMOVE(remove), None)
        self._check(_library().spark_complete_setup(self._handle, ctypes.byref(handlers)))

    @property
    def is_set_up(self) -> bool:
        return bool(_library().spark_is_set_up(self._handle, None))

    @property
    def is_connected(self) -> bool:
        return bool(_library().spark_is_connected(self._handle))

    # Chats and messages

    def chats(self) -> List[Chat]:
        lib = _library()
        array, count = ctypes.POINTER(_CChat)(), ctypes.c_size_t()
        self._check(lib.spark_list_chats(self._handle, ctypes.byref(array), ctypes.byref(count)))
        try:
            return [Chat(_text(c.chat_id), _text(c.subject), _text(c.participants).split(","), c.unread_count,
                         bool(c.is_active), bool(c.post_quantum)) for c in array[: count.value]]
        finally:
            lib.spark_chats_free(array, count)

    def start_chat(self, users: Sequence[str], subject: str = "") -> str:
        """Starts a chat (one user: one-to-one); returns its id."""
        names = (ctypes.c_char_p * len(users))(*[user.encode() for user in users])
        chat_id = ctypes.c_void_p()
        self._check(_library().spark_start_chat(self._handle, names, len(users), subject.encode(), ctypes.byref(chat_id)))
        return _taken_string(chat_id)

    def send(self, chat_id: str, text: str) -> Message:
        return self._send(_library().spark_send, chat_id, text)

    def queue(self, chat_id: str, text: str) -> Message:
        """Sends without waiting for the domain: returns the message once stored (state SENDING);
        the chat's messages are posted in order, several in one request, and each one's later
        states come as MESSAGE_STATE events."""
        return self._send(_library().spark_queue, chat_id, text)

    def queue_many(self, chat_id: str, texts: Sequence[str]) -> List[Message]:
        """Sends 1 to 256 texts at once, in their order, without waiting for the domain: all stored
        in one transaction (or, when it fails, none) and posted together; returns them as stored."""
        lib = _library()
        array = (ctypes.c_char_p * len(texts))(*[text.encode() for text in texts])
        sent = ctypes.POINTER(_CMessage)()
        self._check(lib.spark_queue_many(self._handle, chat_id.encode(), array, len(texts), ctypes.byref(sent)))
        try:
            return [_message(sent[i]) for i in range(len(texts))]
        finally:
            lib.spark_messages_free(sent, len(texts))

    def _send(self, function, chat_id: str, text: str) -> Message:
        sent = ctypes.POINTER(_CMessage)()
        self._check(function(self._handle, chat_id.encode(), text.encode(), ctypes.byref(sent)))
        try:
            return _message(sent[0])
        finally:
            _library().spark_messages_free(sent, 1)

    def messages(self, chat_id: str, before: int = 0, limit: int = 50) -> List[Message]:
        lib = _library()
        array, count = ctypes.POINTER(_CMessage)(), ctypes.c_size_t()
        self._check(lib.spark_list_messages(self._handle, chat_id.encode(), before, limit, ctypes.byref(array),
                                            ctypes.byref(count)))
        try:
            return [_message(array[i]) for i in range(count.value)]
        finally:
            lib.spark_messages_free(array, count)

    def search(self, query: str, chat_id: Optional[str] = None, sender: Optional[str] = None, limit: int = 20,
               cursor: Optional[str] = None) -> "SearchPage":
        """This device's messages with every word of `query` (`lunch*`, "a phrase", 東京 by substring),
        best first; `page.next` is the cursor of the next page (None after the last)."""
        lib = _library()
        ids, snippets = ctypes.POINTER(ctypes.c_char_p)(), ctypes.POINTER(ctypes.c_char_p)()
        count, next_cursor = ctypes.c_size_t(), ctypes.c_void_p()
        self._check(lib.spark_search(
            self._handle, query.encode(), chat_id.encode() if chat_id is not None else None,
            sender.encode() if sender is not None else None, limit, cursor.encode() if cursor is not None else None,
            ctypes.byref(ids), ctypes.byref(snippets), ctypes.byref(count), ctypes.byref(next_cursor)))
        try:
            results = [SearchResult(_text(ids[i]), _text(snippets[i])) for i in range(count.value)]
            following = ctypes.cast(next_cursor, ctypes.c_char_p).value.decode() if next_cursor.value else None
            return SearchPage(results, following)
        finally:
            lib.spark_strings_free(ids, count)
            lib.spark_strings_free(snippets, count)
            if next_cursor.value:
                lib.spark_free(next_cursor)

    def mark_read(self, chat_id: str) -> None:
        self._check(_library().spark_mark_read(self._handle, chat_id.encode()))

    def edit(self, message_id: str, text: str) -> None:
        self._check(_library().spark_edit(self._handle, message_id.encode(), text.encode()))

    def message(self, message_id: str) -> Message:
        """One message by its id (SparkError NOT_FOUND when this device has none)."""
        lib = _library()
        found = ctypes.POINTER(_CMessage)()
        self._check(lib.spark_get_message(self._handle, message_id.encode(), ctypes.byref(found)))
        try:
            return _message(found[0])
        finally:
            lib.spark_messages_free(found, 1)

    # Rich messaging

    def react(self, message_id: str, emoji: str) -> None:
        """Adds this user's emoji to a message (one per user per emoji)."""
        self._check(_library().spark_react(self._handle, message_id.encode(), emoji.encode()))

    def remove_reaction(self, message_id: str, emoji: str) -> None:
        self._check(_library().spark_remove_reaction(self._handle, message_id.encode(), emoji.encode()))

    def recall(self, message_id: str) -> None:
        """Deletes a message this user sent for everyone (its file too)."""
        self._check(_library().spark_recall(self._handle, message_id.encode()))

    def set_disappearing_timer(self, chat_id: str, seconds: int) -> None:
        """Messages' content goes `seconds` after sent (sender) or read (others); 0 turns it off."""
        self._check(_library().spark_set_disappearing_timer(self._handle, chat_id.encode(), seconds))

    def send_typing(self, chat_id: str, is_typing: bool = True) -> None:
        self._check(_library().spark_send_typing(self._handle, chat_id.encode(), 1 if is_typing else 0))

    def send_chat_event(self, chat_id: str, tag: str, data: Optional[str] = None) -> None:
        """An app-defined live event for the chat's online members; never stored."""
        self._check(_library().spark_send_chat_event(
            self._handle, chat_id.encode(), tag.encode(), data.encode() if data is not None else None))

    def send_file(self, chat_id: str, path: str, caption: str = "",
                  progress: Optional[Callable[[int, int], None]] = None) -> Message:
        """Sends a file, encrypted on this device and uploaded in parts; returns its message once
        sent. `progress(done, total)` is called during the call as parts move."""
        lib = _library()
        sent = ctypes.POINTER(_CMessage)()
        self._check(lib.spark_send_file(self._handle, chat_id.encode(), path.encode(), caption.encode(),
                                        _progress(progress), None, ctypes.byref(sent)))
        try:
            return _message(sent[0])
        finally:
            lib.spark_messages_free(sent, 1)

    def save_attachment(self, message_id: str, path: str,
                        progress: Optional[Callable[[int, int], None]] = None) -> None:
        """Saves a message's file at `path` once every byte checked (nothing is left if not)."""
        self._check(_library().spark_save_attachment(
            self._handle, message_id.encode(), path.encode(), _progress(progress), None))

    def thumbnail(self, message_id: str) -> Optional[bytes]:
        """The thumbnail of a message's file, or None."""
        lib = _library()
        bytes_, size = ctypes.c_void_p(), ctypes.c_size_t()
        self._check(lib.spark_thumbnail(self._handle, message_id.encode(), ctypes.byref(bytes_), ctypes.byref(size)))
        if not bytes_.value:
            return None
        try:
            return ctypes.string_at(bytes_.value, size.value)
        finally:
            lib.spark_free(bytes_)

    def block(self, user_id: str) -> None:
        """Every device of this user drops what `user_id` sends from now on, and their invitations."""
        self._check(_library().spark_block(self._handle, user_id.encode()))

    def unblock(self, user_id: str) -> None:
        self._check(_library().spark_unblock(self._handle, user_id.encode()))

    def blocked_users(self) -> List[str]:
        lib = _library()
        array, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
        self._check(lib.spark_blocked_users(self._handle, ctypes.byref(array), ctypes.byref(count)))
        try:
            return [_text(array[i]) for i in range(count.value)]
        finally:
            lib.spark_strings_free(array, count)

    def report(self, chat_id: str, user_id: str, message_ids: Sequence[str], reason: str) -> int:
        """Reports `user_id` to the operator, revealing those of their messages; returns its number."""
        ids = (ctypes.c_char_p * len(message_ids))(*[i.encode() for i in message_ids])
        number = ctypes.c_int64()
        self._check(_library().spark_report(self._handle, chat_id.encode(), user_id.encode(), ids, len(message_ids),
                                            reason.encode(), ctypes.byref(number)))
        return number.value

    def check_transparency(self) -> Optional[str]:
        """Checks the domain's key-transparency log now: this user's identity and every
        contact's. Returns the alarm raised, or None."""
        alarm = ctypes.c_void_p()
        self._check(_library().spark_check_transparency(self._handle, ctypes.byref(alarm)))
        return _taken_string(alarm) if alarm.value else None

    def safety_number(self, user_id: str) -> str:
        number = ctypes.c_void_p()
        self._check(_library().spark_safety_number(self._handle, user_id.encode(), ctypes.byref(number)))
        return _taken_string(number)

    # Events

    @property
    def event_fd(self) -> int:
        """Readable while events wait (owned by the client)."""
        return _library().spark_event_fd(self._handle)

    def next_event(self) -> Optional[Event]:
        """The next waiting event, or None."""
        lib = _library()
        pointer = ctypes.POINTER(_CEvent)()
        self._check(lib.spark_next_event(self._handle, ctypes.byref(pointer)))
        if not pointer:
            return None
        try:
            c = pointer[0]
            return Event(EventKind(c.kind), _text(c.chat_id), _text(c.message_id), _text(c.user_id), c.state,
                         _text(c.text), _message(c.message[0]) if c.message else None, _text(c.data))
        finally:
            lib.spark_event_free(pointer)

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """Every event as it comes; ends when none came for `timeout` seconds (None: never)."""
        while True:
            event = self.next_event()
            if event is not None:
                yield event
                continue
            ready, _, _ = select.select([self.event_fd], [], [], timeout)
            if not ready:
                return

    async def async_events(self) -> AsyncIterator[Event]:
        """Every event as it comes, for asyncio (the descriptor is watched by the running loop)."""
        loop = asyncio.get_running_loop()
        while True:
            event = self.next_event()
            if event is not None:
                yield event
                continue
            readable = loop.create_future()
            loop.add_reader(self.event_fd, lambda: readable.done() or readable.set_result(None))
            try:
                await readable
            finally:
                loop.remove_reader(self.event_fd)
