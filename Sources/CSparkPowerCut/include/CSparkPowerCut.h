// A SQLite VFS that simulates power cuts, for the durability tests (SparkTestSupport's
// `PowerCut`). It wraps the default VFS and becomes the default itself; files whose path starts
// with a watched prefix have their writes since their last sync kept apart (the bytes each
// overwrote, so they can be taken back), as SQLite's own crash tests do. A cut throws away all of
// them, or each with probability 1/2, and makes every handle opened before it fail from then on:
// what was not synced is lost, and the process that held the files is dead to them.
#ifndef SPARK_POWERCUT_H
#define SPARK_POWERCUT_H

#include <stdint.h>

/// Registers the VFS as the default (once; later calls do nothing). 0 on success, else an
/// SQLite error code.
int spark_powercut_install(void);

/// Keeps apart the unsynced writes of the files whose path starts with `prefix` (a prefix
/// watched again is one; a prefix is kept for the life of the process).
void spark_powercut_watch(const char *prefix);

/// Cuts the power of the files under `prefix` now: their unsynced writes are thrown away (all
/// when `lose_all`, else each with probability 1/2 from `seed`) and every handle open on them
/// fails from now on (closing excepted). Returns how many writes were thrown away.
int spark_powercut_cut(const char *prefix, uint64_t seed, int lose_all);

/// Arms a cut of `prefix` that happens by itself at the `countdown`-th write, truncation or sync
/// of its files from now (that call fails as if the power went during it: a write does not
/// land).
void spark_powercut_arm(const char *prefix, int64_t countdown, uint64_t seed, int lose_all);

/// How many cuts of `prefix` have happened (armed or called).
int spark_powercut_cuts(const char *prefix);

/// How many writes, truncations and syncs of files under `prefix` have been made since it was
/// watched (to choose where to arm a cut).
int64_t spark_powercut_operations(const char *prefix);

#endif
