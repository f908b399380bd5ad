// See include/CSparkPowerCut.h. Test support only: every watched write reads what it
// overwrites first, under one lock for the whole process.
#include "CSparkPowerCut.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/// One unsynced write (or truncation): where, and the bytes it overwrote (zeros past the end of
/// the file as it was).
typedef struct {
    sqlite3_int64 offset;
    int length;
    unsigned char *before;
} Write;

/// A watched file's writes since its last sync, shared by every handle on it.
typedef struct Record {
    char *path;
    sqlite3_int64 synced_size;
    Write *writes;
    int count, capacity;
    struct Record *next;
} Record;

/// A watched prefix: its cuts so far (`epoch` counts them: a handle opened under an older one
/// is dead), its operations, and an armed cut.
typedef struct Watch {
    char *prefix;
    size_t length;
    int epoch;
    int64_t operations;
    int64_t countdown;
    uint64_t seed;
    int lose_all;
    struct Watch *next;  // a list: handles keep pointers to their watch
} Watch;

typedef struct {
    sqlite3_file base;
    Watch *watch;  // NULL: not watched
    int epoch;
    Record *record;
    sqlite3_file *real;  // the wrapped VFS's file, right after this struct
} File;

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static Watch *watches;
static Record *records;
static sqlite3_vfs *real_vfs;
static sqlite3_vfs powercut_vfs;

static int dead(const File *file) { return file->watch && file->epoch != file->watch->epoch; }

static Watch *watch_for(const char *path) {
    Watch *best = NULL;
    for (Watch *watch = watches; watch; watch = watch->next) {
        if (strncmp(path, watch->prefix, watch->length) == 0 && (!best || watch->length > best->length)) best = watch;
    }
    return best;
}

static Watch *watch_named(const char *prefix) {
    for (Watch *watch = watches; watch; watch = watch->next) {
        if (strcmp(watch->prefix, prefix) == 0) return watch;
    }
    return NULL;
}

static sqlite3_int64 size_on_disk(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 ? (sqlite3_int64)info.st_size : 0;
}

static Record *record_for(const char *path) {
    for (Record *record = records; record; record = record->next) {
        if (strcmp(record->path, path) == 0) return record;
    }
    Record *record = calloc(1, sizeof(Record));
    if (!record) return NULL;
    record->path = strdup(path);
    record->synced_size = size_on_disk(path);
    record->next = records;
    records = record;
    return record;
}

static void forget_writes(Record *record) {
    for (int i = 0; i < record->count; i++) free(record->writes[i].before);
    record->count = 0;
}

static uint64_t next_random(uint64_t *state) {
    // SplitMix64: a different stream for every seed, good enough for coin flips.
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// The cut itself (mutex held): each file under the watch loses its unsynced writes (all, or
/// each on a coin flip), newest first, and every handle opened before is dead.
static int cut_locked(Watch *watch, uint64_t seed, int lose_all) {
    int lost = 0;
    uint64_t random = seed;
    for (Record *record = records; record; record = record->next) {
        if (strncmp(record->path, watch->prefix, watch->length) != 0) continue;
        int descriptor = open(record->path, O_RDWR | O_CLOEXEC);
        if (descriptor >= 0) {
            for (int i = record->count - 1; i >= 0; i--) {
                const Write *write = &record->writes[i];
                if (!lose_all && (next_random(&random) & 1)) continue;
                ssize_t done = pwrite(descriptor, write->before, (size_t)write->length, (off_t)write->offset);
                (void)done;
                lost++;
            }
            if (lose_all) {
                int truncated = ftruncate(descriptor, (off_t)record->synced_size);
                (void)truncated;
            }
            close(descriptor);
        }
        forget_writes(record);
        record->synced_size = size_on_disk(record->path);
        // The WAL's index (`-shm`) is memory the machine lost: zeroed, so that the next open
        // rebuilds it from the log as it is now, whoever still maps it.
        size_t length = strlen(record->path);
        if (length > 4 && strcmp(record->path + length - 4, "-wal") == 0) {
            char *shm = strdup(record->path);
            if (shm) {
                memcpy(shm + length - 4, "-shm", 4);
                int index = open(shm, O_RDWR | O_CLOEXEC);
                if (index >= 0) {
                    struct stat info;
                    if (fstat(index, &info) == 0 && info.st_size > 0) {
                        void *zeros = calloc(1, (size_t)info.st_size);
                        if (zeros) {
                            ssize_t done = pwrite(index, zeros, (size_t)info.st_size, 0);
                            (void)done;
                            free(zeros);
                        }
                    }
                    close(index);
                }
                free(shm);
            }
        }
    }
    watch->epoch++;
    watch->countdown = 0;
    return lost;
}

/// Counts an operation of a watched file (mutex held); true when an armed cut happens at it.
static int tick(Watch *watch) {
    watch->operations++;
    if (watch->countdown > 0 && --watch->countdown == 0) {
        cut_locked(watch, watch->seed, watch->lose_all);
        return 1;
    }
    return 0;
}

/// Keeps the bytes [offset, offset + length) of the file as they are, before a write or a
/// truncation changes them (mutex held).
static int keep_before(File *file, sqlite3_int64 offset, sqlite3_int64 length) {
    Record *record = file->record;
    if (!record || length <= 0) return SQLITE_OK;
    if (record->count == record->capacity) {
        int capacity = record->capacity ? record->capacity * 2 : 16;
        Write *grown = realloc(record->writes, (size_t)capacity * sizeof(Write));
        if (!grown) return SQLITE_NOMEM;
        record->writes = grown;
        record->capacity = capacity;
    }
    unsigned char *before = calloc(1, (size_t)length);
    if (!before) return SQLITE_NOMEM;
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) {
        free(before);
        return rc;
    }
    if (offset < size) {
        sqlite3_int64 present = size - offset < length ? size - offset : length;
        rc = file->real->pMethods->xRead(file->real, before, (int)present, offset);
        if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) {
            free(before);
            return rc;
        }
    }
    record->writes[record->count++] = (Write){offset, (int)length, before};
    return SQLITE_OK;
}

// MARK: The file's methods

static int pc_close(sqlite3_file *f) {
    File *file = (File *)f;
    int rc = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    return dead(file) ? SQLITE_OK : rc;
}

static int pc_read(sqlite3_file *f, void *buffer, int amount, sqlite3_int64 offset) {
    File *file = (File *)f;
    if (dead(file)) return SQLITE_IOERR_READ;
    return file->real->pMethods->xRead(file->real, buffer, amount, offset);
}

static int pc_write(sqlite3_file *f, const void *buffer, int amount, sqlite3_int64 offset) {
    File *file = (File *)f;
    if (!file->watch) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    pthread_mutex_lock(&mutex);
    int rc = SQLITE_IOERR_WRITE;
    if (!dead(file) && !tick(file->watch)) {
        rc = keep_before(file, offset, amount);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    }
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int pc_truncate(sqlite3_file *f, sqlite3_int64 size) {
    File *file = (File *)f;
    if (!file->watch) return file->real->pMethods->xTruncate(file->real, size);
    pthread_mutex_lock(&mutex);
    int rc = SQLITE_IOERR_TRUNCATE;
    if (!dead(file) && !tick(file->watch)) {
        sqlite3_int64 current = 0;
        rc = file->real->pMethods->xFileSize(file->real, &current);
        if (rc == SQLITE_OK && current > size) rc = keep_before(file, size, current - size);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xTruncate(file->real, size);
    }
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int pc_sync(sqlite3_file *f, int flags) {
    File *file = (File *)f;
    if (!file->watch) return file->real->pMethods->xSync(file->real, flags);
    pthread_mutex_lock(&mutex);
    int rc = SQLITE_IOERR_FSYNC;
    if (!dead(file) && !tick(file->watch)) {
        rc = file->real->pMethods->xSync(file->real, flags);
        if (rc == SQLITE_OK && file->record) {
            forget_writes(file->record);
            sqlite3_int64 size = 0;
            if (file->real->pMethods->xFileSize(file->real, &size) == SQLITE_OK) file->record->synced_size = size;
        }
    }
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int pc_file_size(sqlite3_file *f, sqlite3_int64 *size) {
    File *file = (File *)f;
    if (dead(file)) return SQLITE_IOERR_FSTAT;
    return file->real->pMethods->xFileSize(file->real, size);
}

static int pc_lock(sqlite3_file *f, int level) {
    File *file = (File *)f;
    if (dead(file)) return SQLITE_IOERR_LOCK;
    return file->real->pMethods->xLock(file->real, level);
}

static int pc_unlock(sqlite3_file *f, int level) {
    File *file = (File *)f;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int pc_check_reserved(sqlite3_file *f, int *out) {
    File *file = (File *)f;
    if (dead(file)) return SQLITE_IOERR_CHECKRESERVEDLOCK;
    return file->real->pMethods->xCheckReservedLock(file->real, out);
}

static int pc_file_control(sqlite3_file *f, int op, void *argument) {
    File *file = (File *)f;
    if (dead(file)) return SQLITE_IOERR;
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

static int pc_sector_size(sqlite3_file *f) {
    File *file = (File *)f;
    return file->real->pMethods->xSectorSize(file->real);
}

static int pc_device_characteristics(sqlite3_file *f) {
    File *file = (File *)f;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int pc_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **pointer) {
    File *file = (File *)f;
    if (dead(file)) return SQLITE_IOERR_SHMMAP;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, pointer);
}

static int pc_shm_lock(sqlite3_file *f, int offset, int count, int flags) {
    File *file = (File *)f;
    if (dead(file) && (flags & SQLITE_SHM_LOCK)) return SQLITE_IOERR_SHMLOCK;
    return file->real->pMethods->xShmLock(file->real, offset, count, flags);
}

static void pc_shm_barrier(sqlite3_file *f) {
    File *file = (File *)f;
    file->real->pMethods->xShmBarrier(file->real);
}

static int pc_shm_unmap(sqlite3_file *f, int delete_flag) {
    File *file = (File *)f;
    return file->real->pMethods->xShmUnmap(file->real, delete_flag);
}

static int pc_fetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **pointer) {
    File *file = (File *)f;
    // A watched file is never mapped: every write goes through xWrite, where it is kept.
    if (file->watch) {
        *pointer = NULL;
        return SQLITE_OK;
    }
    return file->real->pMethods->xFetch(file->real, offset, amount, pointer);
}

static int pc_unfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) {
    File *file = (File *)f;
    if (file->watch) return SQLITE_OK;
    return file->real->pMethods->xUnfetch(file->real, offset, pointer);
}

static const sqlite3_io_methods methods = {
    3,
    pc_close,
    pc_read,
    pc_write,
    pc_truncate,
    pc_sync,
    pc_file_size,
    pc_lock,
    pc_unlock,
    pc_check_reserved,
    pc_file_control,
    pc_sector_size,
    pc_device_characteristics,
    pc_shm_map,
    pc_shm_lock,
    pc_shm_barrier,
    pc_shm_unmap,
    pc_fetch,
    pc_unfetch,
};

// MARK: The VFS

static int pc_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags) {
    (void)vfs;
    File *file = (File *)f;
    memset(file, 0, sizeof(File));
    file->real = (sqlite3_file *)(file + 1);
    int rc = real_vfs->xOpen(real_vfs, name, file->real, flags, out_flags);
    // SQLite closes a file whose methods are set even when the open failed.
    file->base.pMethods = file->real->pMethods ? &methods : NULL;
    if (rc != SQLITE_OK || !name || file->real->pMethods == NULL || file->real->pMethods->iVersion < 3) return rc;
    pthread_mutex_lock(&mutex);
    Watch *watch = watch_for(name);
    if (watch) {
        file->watch = watch;
        file->epoch = watch->epoch;
        file->record = record_for(name);
    }
    pthread_mutex_unlock(&mutex);
    return rc;
}

static int pc_delete(sqlite3_vfs *vfs, const char *name, int sync_directory) {
    (void)vfs;
    int rc = real_vfs->xDelete(real_vfs, name, sync_directory);
    pthread_mutex_lock(&mutex);
    for (Record *record = records; record; record = record->next) {
        if (strcmp(record->path, name) == 0) {
            forget_writes(record);
            record->synced_size = 0;
        }
    }
    pthread_mutex_unlock(&mutex);
    return rc;
}

int spark_powercut_install(void) {
    pthread_mutex_lock(&mutex);
    int rc = SQLITE_OK;
    if (!real_vfs) {
        sqlite3_vfs *found = sqlite3_vfs_find(NULL);
        if (!found) {
            rc = SQLITE_ERROR;
        } else {
            // The wrapped VFS's own functions, but for opening and deleting; they read no more
            // of the VFS they are given than the fields copied here.
            powercut_vfs = *found;
            powercut_vfs.szOsFile = (int)sizeof(File) + found->szOsFile;
            powercut_vfs.zName = "spark-powercut";
            powercut_vfs.pNext = NULL;
            powercut_vfs.xOpen = pc_open;
            powercut_vfs.xDelete = pc_delete;
            rc = sqlite3_vfs_register(&powercut_vfs, 1);
            if (rc == SQLITE_OK) real_vfs = found;
        }
    }
    pthread_mutex_unlock(&mutex);
    return rc;
}

void spark_powercut_watch(const char *prefix) {
    pthread_mutex_lock(&mutex);
    if (!watch_named(prefix)) {
        Watch *watch = calloc(1, sizeof(Watch));
        if (watch) {
            watch->prefix = strdup(prefix);
            watch->length = strlen(prefix);
            watch->next = watches;
            watches = watch;
        }
    }
    pthread_mutex_unlock(&mutex);
}

int spark_powercut_cut(const char *prefix, uint64_t seed, int lose_all) {
    pthread_mutex_lock(&mutex);
    Watch *watch = watch_named(prefix);
    int lost = watch ? cut_locked(watch, seed, lose_all) : 0;
    pthread_mutex_unlock(&mutex);
    return lost;
}

void spark_powercut_arm(const char *prefix, int64_t countdown, uint64_t seed, int lose_all) {
    pthread_mutex_lock(&mutex);
    Watch *watch = watch_named(prefix);
    if (watch) {
        watch->countdown = countdown;
        watch->seed = seed;
        watch->lose_all = lose_all;
    }
    pthread_mutex_unlock(&mutex);
}

int spark_powercut_cuts(const char *prefix) {
    pthread_mutex_lock(&mutex);
    Watch *watch = watch_named(prefix);
    int cuts = watch ? watch->epoch : 0;
    pthread_mutex_unlock(&mutex);
    return cuts;
}

int64_t spark_powercut_operations(const char *prefix) {
    pthread_mutex_lock(&mutex);
    Watch *watch = watch_named(prefix);
    int64_t operations = watch ? watch->operations : 0;
    pthread_mutex_unlock(&mutex);
    return operations;
}
