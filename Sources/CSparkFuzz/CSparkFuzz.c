// The replay driver: libFuzzer's `LLVMFuzzerRunDriver` when the program is not built with
// `-sanitize=fuzzer`. Weak, so that libFuzzer's own definition wins when it is linked.
#include "CSparkFuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int replay_file(const char *path, int (*callback)(const uint8_t *, size_t)) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "spark-fuzz: cannot read %s\n", path);
        return 1;
    }
    size_t capacity = 4096, size = 0;
    uint8_t *data = malloc(capacity);
    size_t got;
    while (data != NULL && (got = fread(data + size, 1, capacity - size, file)) > 0) {
        size += got;
        if (size == capacity) {
            capacity *= 2;
            uint8_t *grown = realloc(data, capacity);
            if (grown == NULL) { free(data); data = NULL; }
            else data = grown;
        }
    }
    fclose(file);
    if (data == NULL) return 1;
    callback(data, size);
    free(data);
    return 0;
}

static int replay(const char *path, int (*callback)(const uint8_t *, size_t), int *count) {
    struct stat info;
    if (stat(path, &info) != 0) {
        fprintf(stderr, "spark-fuzz: no such file or directory: %s\n", path);
        return 1;
    }
    if (!S_ISDIR(info.st_mode)) {
        *count += 1;
        return replay_file(path, callback);
    }
    DIR *directory = opendir(path);
    if (directory == NULL) return 1;
    int failures = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        size_t length = strlen(path) + strlen(entry->d_name) + 2;
        char *child = malloc(length);
        if (child == NULL) { failures++; continue; }
        if (snprintf(child, length, "%s/%s", path, entry->d_name) != (int)length - 1) {
            failures++;
            free(child);
            continue;
        }
        failures += replay(child, callback, count);
        free(child);
    }
    closedir(directory);
    return failures;
}

__attribute__((weak)) int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t)) {
    int failures = 0, count = 0;
    for (int index = 1; index < *argc; index++) {
        const char *argument = (*argv)[index];
        if (argument[0] == '-') continue;  // libFuzzer's flags mean nothing here
        failures += replay(argument, callback, &count);
    }
    printf("spark-fuzz: replayed %d inputs\n", count);
    return failures == 0 ? 0 : 1;
}

// libFuzzer's driver refers to this entry point of programs without their own `main`; ours
// passes its callback to `LLVMFuzzerRunDriver` instead, so this one is never called.
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)data;
    (void)size;
    return 0;
}
