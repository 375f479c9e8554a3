/* A small WiredTiger driver: the shim's acceptance test (crates/shim/tests/wiredtiger.rs) and
 * the lab's `real-wiredtiger` experiment (crates/lab/src/realwt.rs) run it under the shim.
 *
 * It lays its data out as mongod does: `collection.wt` maps a record id to a 1000-byte
 * document, `index.wt` maps the document's key ("user" + FNV-1a-64 of its number, as YCSB) to
 * the record id. The load inserts `records` documents in order (one thread); the run makes
 * `ops` operations, or runs for `seconds`, from `threads` threads over YCSB's scrambled
 * zipfian (θ 0.99): a read looks the key up in the index and reads the document; an update
 * looks it up and rewrites the document with one 100-byte field changed (`read_pct` % reads).
 * Journal on. WiredTiger logs its statistics once, as JSON, when the connection closes
 * (statistics_log=(wait=0,on_close=true)), after its final checkpoint.
 *
 * After the load it checkpoints and creates and removes the file `flashdoc-run-phase` in DIR:
 * in a trace that file's create marks where the run phase begins. Then, with `device_fill`
 * given, it sizes the run as flashdoc's lab sizes its own engine (lab::run::Sizing): the
 * loaded tables' bytes D (both files' sizes after the checkpoint), the device
 * C = max(16384 pages, ceil(D / device_fill / 4096 pages)), a cache of max(1 MB,
 * cache_share × D) and a checkpoint every checkpoint_share × C bytes written: a thread of its
 * own polls WiredTiger's statistics every 2 ms (block manager bytes written plus journal
 * bytes written) and checkpoints when that many were written since the last checkpoint
 * began, as flashdoc's engine triggers its checkpoints by bytes written. It prints one JSON
 * line with what it did.
 *
 * usage: wtdriver DIR key=value...
 *   records (10000), ops (0) or seconds (0; one of the two), threads (2), read_pct (0),
 *   seed (1), direct_io (0|1: direct_io=[data,log]), load_cache_mb (16),
 *   checkpoint_wait (0: seconds between checkpoints, WiredTiger's checkpoint=(wait=…)),
 *   log_file_kb (2048), device_fill, cache_share, checkpoint_share (sizing, all or none),
 *   min_checkpoints (0: a timed run goes on past `seconds`, for at most 10 times as long, until
 *   WiredTiger counts this many successful checkpoints) */
#include <wiredtiger.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VALUE_BYTES 1000
#define FIELD_BYTES 100
#define MAX_THREADS 16
#define ZIPF_THETA 0.99

static WT_CONNECTION *conn;
static long records, ops, seconds, threads = 2, read_pct, seed = 1, direct_io, load_cache_mb = 16,
    checkpoint_wait, log_file_kb = 2048, min_checkpoints;
static double device_fill, cache_share, checkpoint_share;
static volatile int stop, run_over;
static long ops_done;
static double zetan, eta;

static void die(const char *what, int ret) {
    if (ret > 0)
        fprintf(stderr, "wtdriver: %s: %s\n", what, wiredtiger_strerror(ret));
    else
        fprintf(stderr, "wtdriver: %s\n", what);
    exit(ret > 0 ? 1 : 2);
}
#define CHECK(call, what)           \
    do {                            \
        int r_ = (call);            \
        if (r_ != 0) die(what, r_); \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static uint64_t fnv64(uint64_t v) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (int i = 0; i < 8; i++) {
        h ^= v & 0xff;
        h *= 1099511628211ULL;
        v >>= 8;
    }
    return h;
}
/* YCSB's scrambled zipfian over `records` items (Gray et al.'s generator, then FNV-scrambled). */
static uint64_t zipf(uint64_t *s) {
    double u = (xorshift(s) >> 11) * (1.0 / 9007199254740992.0), uz = u * zetan;
    uint64_t r;
    if (uz < 1.0)
        r = 0;
    else if (uz < 1.0 + pow(0.5, ZIPF_THETA))
        r = 1;
    else
        r = (uint64_t)(records * pow(eta * u - eta + 1, 1.0 / (1.0 - ZIPF_THETA)));
    return fnv64(r) % (uint64_t)records;
}
static void key_of(char *buf, uint64_t i) {
    snprintf(buf, 32, "user%llu", (unsigned long long)(fnv64(i) & 0x7fffffffffffffffULL));
}

typedef struct {
    WT_SESSION *s;
    WT_CURSOR *coll, *idx;
    uint64_t rng;
    unsigned char doc[VALUE_BYTES];
} Worker;

static void open_worker(Worker *w, uint64_t rng) {
    CHECK(conn->open_session(conn, NULL, NULL, &w->s), "open_session");
    CHECK(w->s->open_cursor(w->s, "table:collection", NULL, NULL, &w->coll), "open collection");
    CHECK(w->s->open_cursor(w->s, "table:index", NULL, NULL, &w->idx), "open index");
    w->rng = rng;
    for (int i = 0; i < VALUE_BYTES; i++) w->doc[i] = (unsigned char)xorshift(&w->rng);
}

/* One operation on document `n`: 0, or WT_ROLLBACK (a conflict: the caller retries). */
static int operate(Worker *w, uint64_t n, int read) {
    char key[32];
    key_of(key, n);
    w->idx->set_key(w->idx, key);
    int ret = w->idx->search(w->idx);
    int64_t rid = 0;
    if (ret == 0) ret = w->idx->get_value(w->idx, &rid);
    if (ret == 0) {
        w->coll->set_key(w->coll, rid);
        if (read) {
            WT_ITEM v;
            ret = w->coll->search(w->coll);
            if (ret == 0) ret = w->coll->get_value(w->coll, &v);
        } else {
            size_t field = xorshift(&w->rng) % (VALUE_BYTES / FIELD_BYTES);
            for (int i = 0; i < FIELD_BYTES; i++)
                w->doc[field * FIELD_BYTES + i] = (unsigned char)xorshift(&w->rng);
            WT_ITEM v = {.data = w->doc, .size = VALUE_BYTES};
            w->coll->set_value(w->coll, &v);
            ret = w->coll->update(w->coll);
        }
    }
    w->idx->reset(w->idx);
    w->coll->reset(w->coll);
    if (ret != 0 && ret != WT_ROLLBACK) die(read ? "read" : "update", ret);
    return ret;
}

static void *run(void *arg) {
    Worker w;
    open_worker(&w, 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1) ^ (uint64_t)seed);
    while (!stop) {
        if (ops > 0 && __atomic_fetch_add(&ops_done, 1, __ATOMIC_RELAXED) >= ops) break;
        uint64_t n = zipf(&w.rng);
        int read = (long)(xorshift(&w.rng) % 100) < read_pct;
        for (;;) {
            CHECK(w.s->begin_transaction(w.s, NULL), "begin");
            if (operate(&w, n, read) == 0) {
                CHECK(w.s->commit_transaction(w.s, NULL), "commit");
                break;
            }
            CHECK(w.s->rollback_transaction(w.s, NULL), "rollback");
        }
    }
    CHECK(w.s->close(w.s, NULL), "session close");
    return NULL;
}

static int64_t stat_value(WT_SESSION *s, int key) {
    WT_CURSOR *c;
    const char *desc, *pvalue;
    int64_t value;
    CHECK(s->open_cursor(s, "statistics:", NULL, NULL, &c), "statistics cursor");
    c->set_key(c, key);
    CHECK(c->search(c), "statistics search");
    CHECK(c->get_value(c, &desc, &pvalue, &value), "statistics value");
    CHECK(c->close(c), "statistics close");
    return value;
}

static int64_t bytes_written(WT_SESSION *s) {
    return stat_value(s, WT_STAT_CONN_BLOCK_BYTE_WRITE) + stat_value(s, WT_STAT_CONN_LOG_BYTES_WRITTEN);
}

/* Checkpoints every `arg` bytes written (see the header), until the run is over. */
static void *checkpointer(void *arg) {
    int64_t every = *(int64_t *)arg;
    WT_SESSION *s;
    CHECK(conn->open_session(conn, NULL, NULL, &s), "open_session");
    int64_t last = bytes_written(s);
    while (!run_over) {
        usleep(2000);
        int64_t now_written = bytes_written(s);
        if (now_written - last >= every) {
            last = now_written;
            CHECK(s->checkpoint(s, NULL), "checkpoint");
        }
    }
    CHECK(s->close(s, NULL), "session close");
    return NULL;
}

static int64_t file_bytes(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &st) != 0) die(path, errno);
    return st.st_size;
}

static void option(const char *arg) {
    const char *eq = strchr(arg, '=');
    if (eq == NULL) die(arg, -1);
    size_t n = (size_t)(eq - arg);
    const char *v = eq + 1;
#define LONG(name) if (n == strlen(#name) && strncmp(arg, #name, n) == 0) { name = atol(v); return; }
#define DOUBLE(name) if (n == strlen(#name) && strncmp(arg, #name, n) == 0) { name = atof(v); return; }
    LONG(records) LONG(ops) LONG(seconds) LONG(threads) LONG(read_pct) LONG(seed) LONG(direct_io)
    LONG(load_cache_mb) LONG(checkpoint_wait) LONG(log_file_kb) LONG(min_checkpoints)
    DOUBLE(device_fill) DOUBLE(cache_share) DOUBLE(checkpoint_share)
    die(arg, -1);
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: wtdriver DIR key=value...", -1);
    const char *dir = argv[1];
    for (int i = 2; i < argc; i++) option(argv[i]);
    int sized = device_fill > 0;
    if (records <= 0 || (ops > 0) == (seconds > 0) || threads < 1 || threads > MAX_THREADS ||
        read_pct < 0 || read_pct > 100 || (sized && (cache_share <= 0 || checkpoint_share <= 0)))
        die("records > 0, exactly one of ops and seconds, threads 1..16, read_pct 0..100, and "
            "device_fill with cache_share and checkpoint_share",
            -1);
    zetan = 0;
    for (long i = 1; i <= records; i++) zetan += 1.0 / pow((double)i, ZIPF_THETA);
    eta = (1 - pow(2.0 / records, 1 - ZIPF_THETA)) / (1 - (1 + pow(0.5, ZIPF_THETA)) / zetan);

    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "create,cache_size=%ldMB,log=(enabled=true,file_max=%ldKB),checkpoint=(wait=%ld),"
             "statistics=(fast),statistics_log=(wait=0,on_close=true,json=true),session_max=64%s",
             load_cache_mb, log_file_kb, checkpoint_wait, direct_io ? ",direct_io=[data,log]" : "");
    CHECK(wiredtiger_open(dir, NULL, cfg, &conn), "wiredtiger_open");
    WT_SESSION *s;
    CHECK(conn->open_session(conn, NULL, NULL, &s), "open_session");
    CHECK(s->create(s, "table:collection", "key_format=q,value_format=u"), "create collection");
    CHECK(s->create(s, "table:index", "key_format=S,value_format=q"), "create index");

    double t0 = now();
    Worker w;
    open_worker(&w, (uint64_t)seed);
    for (long i = 0; i < records; i++) {
        char key[32];
        key_of(key, (uint64_t)i);
        WT_ITEM v = {.data = w.doc, .size = VALUE_BYTES};
        w.coll->set_key(w.coll, (int64_t)i + 1);
        w.coll->set_value(w.coll, &v);
        CHECK(w.coll->insert(w.coll), "load collection");
        w.idx->set_key(w.idx, key);
        w.idx->set_value(w.idx, (int64_t)i + 1);
        CHECK(w.idx->insert(w.idx), "load index");
    }
    CHECK(w.s->close(w.s, NULL), "session close");
    CHECK(s->checkpoint(s, NULL), "checkpoint after load");
    double load_s = now() - t0;

    char marker[4096];
    snprintf(marker, sizeof marker, "%s/flashdoc-run-phase", dir);
    /* open(2), not fopen(3): the C library's stdio opens through internals no shim sees. */
    int m = open(marker, O_CREAT | O_WRONLY, 0644);
    if (m < 0 || close(m) != 0 || unlink(marker) != 0) die(marker, errno);

    int64_t db_bytes = file_bytes(dir, "collection.wt") + file_bytes(dir, "index.wt");
    int64_t cache_bytes = 0, checkpoint_bytes = 0;
    pthread_t ckpt;
    if (sized) {
        int64_t pages = (int64_t)ceil((double)db_bytes / device_fill / 4096.0);
        int64_t capacity = (pages < 16384 ? 16384 : pages) * 4096;
        cache_bytes = (int64_t)((double)db_bytes * cache_share);
        if (cache_bytes < (1 << 20)) cache_bytes = 1 << 20;
        checkpoint_bytes = (int64_t)((double)capacity * checkpoint_share);
        if (checkpoint_bytes < 4096) checkpoint_bytes = 4096;
        snprintf(cfg, sizeof cfg, "cache_size=%lld", (long long)cache_bytes);
        CHECK(conn->reconfigure(conn, cfg), "sizing the run");
        pthread_create(&ckpt, NULL, checkpointer, &checkpoint_bytes);
    }

    t0 = now();
    pthread_t t[MAX_THREADS];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i);
    if (seconds > 0) {
        sleep((unsigned)seconds);
        for (long waited = 0; stat_value(s, WT_STAT_CONN_CHECKPOINTS_TOTAL_SUCCEED) < min_checkpoints;
             waited++) {
            if (waited >= seconds * 50) die("too few checkpoints in ten times the run's seconds", -1);
            usleep(200000);
        }
        stop = 1;
    }
    for (long i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double run_s = now() - t0;
    run_over = 1;
    if (sized) pthread_join(ckpt, NULL);
    long done = ops > 0 ? ops : __atomic_load_n(&ops_done, __ATOMIC_RELAXED);
    if (ops == 0) done = -1; /* not counted in a timed run */
    CHECK(s->close(s, NULL), "session close");
    CHECK(conn->close(conn, NULL), "connection close");
    printf("{\"records\":%ld,\"load_s\":%.3f,\"run_ops\":%ld,\"run_s\":%.3f,\"db_load_bytes\":%lld,"
           "\"run_cache_bytes\":%lld,\"checkpoint_bytes\":%lld}\n",
           records, load_s, done, run_s, (long long)db_bytes, (long long)cache_bytes,
           (long long)checkpoint_bytes);
    return 0;
}
