#ifndef SPARK_INTERNAL_H
#define SPARK_INTERNAL_H

/* What the Swift side of libsparksdk needs from C (not installed, not part of the API). */

/* Keeps `message` (copied) as this thread's last error; NULL clears it. */
void spark_internal_set_error(const char *message);

/* A non-blocking, close-on-exec eventfd in semaphore mode (each read takes one), or -1. */
int spark_internal_eventfd(void);

#endif
