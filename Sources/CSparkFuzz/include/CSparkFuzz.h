#ifndef C_SPARK_FUZZ_H
#define C_SPARK_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's entry point for a program with its own `main` (built with `-sanitize=fuzzer`).
/// Without libFuzzer, a weak replacement in this target runs the callback once over every file
/// named in `argv` (directories: every file in them), so the corpus replays as a regression test.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
