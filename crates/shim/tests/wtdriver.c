/* A small WiredTiger driver for the shim's acceptance test (crates/shim/tests/wiredtiger.rs).
 *
 * It loads a table and a secondary "index" table, then runs random updates from two threads for
 * a given time, with WiredTiger checkpointing every second (checkpoint=(wait=1)) and fast
 * statistics on. WiredTiger logs its statistics once, as JSON, when the connection closes
 * (statistics_log=(wait=0,on_close=true)): after its final checkpoint, so the log's
 * "total succeed number of checkpoints" counts every checkpoint the run made.
 *
 * usage: wtdriver DIR SECONDS RECORDS DIRECT_IO(0|1)
 * Files: DIR/docs.wt (the collection), DIR/docs_idx.wt (the index), WiredTigerLog.* (journal),
 * WiredTigerStat.* (the statistics log). */
#include <wiredtiger.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VALUE_MAX 600
#define THREADS 2

static WT_CONNECTION *conn;
static long nrec;
static volatile int stop;

static void die(const char *what, int ret) {
    fprintf(stderr, "wtdriver: %s: %s\n", what, wiredtiger_strerror(ret));
    exit(1);
}
#define CHECK(call, what)           \
    do {                            \
        int r_ = (call);            \
        if (r_ != 0) die(what, r_); \
    } while (0)

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Writes record `id` with a value of a random length, and its index entry (value prefix, id).
 * Returns 0 or WT_ROLLBACK (a conflict with the other thread: the caller retries); dies on any
 * other error. */
static int put(WT_CURSOR *docs, WT_CURSOR *idx, uint64_t id, uint64_t *seed, int overwrite) {
    unsigned char v[VALUE_MAX];
    size_t len = 100 + xorshift(seed) % (VALUE_MAX - 100);
    for (size_t i = 0; i < len; i++) v[i] = (unsigned char)xorshift(seed);
    WT_ITEM item = {.data = v, .size = len};
    docs->set_key(docs, id);
    docs->set_value(docs, &item);
    int ret = overwrite ? docs->update(docs) : docs->insert(docs);
    if (ret == 0) {
        WT_ITEM ikey = {.data = v, .size = 16};
        idx->set_key(idx, &ikey, id);
        idx->set_value(idx, "");
        ret = idx->insert(idx);
    }
    if (ret != 0 && ret != WT_ROLLBACK) die("write", ret);
    return ret;
}

static void *updater(void *arg) {
    uint64_t seed = 0x9E3779B97F4A7C15ULL * (uintptr_t)arg;
    WT_SESSION *s;
    WT_CURSOR *docs, *idx;
    CHECK(conn->open_session(conn, NULL, NULL, &s), "open_session");
    CHECK(s->open_cursor(s, "table:docs", NULL, NULL, &docs), "open docs");
    CHECK(s->open_cursor(s, "table:docs_idx", NULL, "overwrite=true", &idx), "open index");
    while (!stop) {
        CHECK(s->begin_transaction(s, NULL), "begin");
        if (put(docs, idx, xorshift(&seed) % nrec, &seed, 1) == 0)
            CHECK(s->commit_transaction(s, NULL), "commit");
        else
            CHECK(s->rollback_transaction(s, NULL), "rollback");
    }
    CHECK(s->close(s, NULL), "session close");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: wtdriver DIR SECONDS RECORDS DIRECT_IO(0|1)\n");
        return 2;
    }
    long seconds = atol(argv[2]);
    nrec = atol(argv[3]);
    int direct = atoi(argv[4]);
    if (seconds <= 0 || nrec <= 0) die("bad arguments", EINVAL);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "create,cache_size=16MB,log=(enabled=true,file_max=2MB),checkpoint=(wait=1),"
             "statistics=(fast),statistics_log=(wait=0,on_close=true,json=true),session_max=16%s",
             direct ? ",direct_io=[data,log]" : "");
    CHECK(wiredtiger_open(argv[1], NULL, cfg, &conn), "wiredtiger_open");
    WT_SESSION *s;
    CHECK(conn->open_session(conn, NULL, NULL, &s), "open_session");
    CHECK(s->create(s, "table:docs", "key_format=Q,value_format=u,leaf_page_max=4KB,internal_page_max=4KB"),
          "create docs");
    CHECK(s->create(s, "table:docs_idx", "key_format=uQ,value_format=S,leaf_page_max=4KB,internal_page_max=4KB"),
          "create index");
    WT_CURSOR *docs, *idx;
    CHECK(s->open_cursor(s, "table:docs", NULL, NULL, &docs), "open docs");
    CHECK(s->open_cursor(s, "table:docs_idx", NULL, "overwrite=true", &idx), "open index");
    uint64_t seed = 88172645463325252ULL;
    for (long i = 0; i < nrec; i++)
        if (put(docs, idx, (uint64_t)i, &seed, 0) != 0) die("load", WT_ROLLBACK); /* one thread */
    CHECK(docs->close(docs), "close docs");
    CHECK(idx->close(idx), "close index");

    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, updater, (void *)(i + 1));
    sleep((unsigned)seconds);
    stop = 1;
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

    CHECK(s->close(s, NULL), "session close");
    CHECK(conn->close(conn, NULL), "connection close");
    return 0;
}
