// One thread-local pointer for SparkObservable: the current thread's tracking context.
//
// Swift has no thread-local storage of its own. pthread_getspecific behind a Swift `static let`
// key costs a swift_once call (not inlined on Linux) and a __tls_get_addr on every tracked
// read; a C `__thread` variable read through a static inline function is one load.
#ifndef SPARK_THREAD_LOCAL_H
#define SPARK_THREAD_LOCAL_H

extern __thread void *_Nullable spark_observation_context;

static inline void *_Nullable spark_observation_context_get(void) { return spark_observation_context; }
static inline void spark_observation_context_set(void *_Nullable context) { spark_observation_context = context; }

#endif
