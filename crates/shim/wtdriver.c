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
 *   WiredTiger counts this many successful checkpoints),
 *   mix (ycsb: the above, the default; linkbench: see below)
 *
 * mix=linkbench: a LinkBench-like social graph in mongod's layout for LinkBench's three
 * collections (linktable, nodetable, counttable), seven files: `collection-nodes.wt`,
 * `collection-links.wt`, `collection-counts.wt`, their `_id` indexes `index-nodes-id.wt`,
 * `index-links-id.wt`, `index-counts-id.wt`, and the links' secondary index
 * `index-links-id1.wt` (id1, link type, time: what a link-list query scans). The load makes
 * `records` nodes (64–511-byte payloads) and 0–9 outgoing links each (mean 4.5, 96-byte
 * payloads), a count document per node. Each run operation picks a node by the same
 * scrambled zipfian as YCSB and one of LinkBench's default operations with its default
 * weight (per mille): get_node 129, add_node 26, update_node 74, delete_node 10,
 * get_link 5, get_link_list 507, count_link 49, add_link 90, delete_link 30,
 * update_link 80 (69 % reads). A link change rewrites the node's count document, as
 * LinkBench's MongoDB store does. `read_pct` is ignored (the mix fixes it). */
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
static char mix[16] = "ycsb";
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

/* ---- mix=linkbench (see the header) ---- */
#define LB_TABLES 7
enum { LB_NODES, LB_NODES_ID, LB_LINKS, LB_LINKS_ID, LB_LINKS_ID1, LB_COUNTS, LB_COUNTS_ID };
static const char *lb_uri[LB_TABLES] = {
    "table:collection-nodes", "table:index-nodes-id",  "table:collection-links",
    "table:index-links-id",   "table:index-links-id1", "table:collection-counts",
    "table:index-counts-id"};
static const char *lb_format[LB_TABLES] = {
    "key_format=q,value_format=u",   "key_format=q,value_format=q",
    "key_format=q,value_format=u",   "key_format=qqq,value_format=q",
    "key_format=qqq,value_format=q", "key_format=q,value_format=u",
    "key_format=q,value_format=q"};
#define LB_NODE_MIN 64
#define LB_NODE_SPAN 448
#define LB_LINK_BYTES 96
#define LB_MAX_DEGREE 10
/* LinkBench's default operation weights, per mille, in this order. */
enum { GET_NODE, ADD_NODE, UPDATE_NODE, DELETE_NODE, GET_LINK, GET_LINK_LIST, COUNT_LINK,
       ADD_LINK, DELETE_LINK, UPDATE_LINK, LB_OPS };
static const int lb_weight[LB_OPS] = {129, 26, 74, 10, 5, 507, 49, 90, 30, 80};
static int64_t lb_next_node, lb_next_link, lb_clock;

typedef struct {
    WT_SESSION *s;
    WT_CURSOR *c[LB_TABLES];
    uint64_t rng;
    unsigned char buf[LB_NODE_MIN + LB_NODE_SPAN];
} LbWorker;

static void lb_open(LbWorker *w, uint64_t rng) {
    CHECK(conn->open_session(conn, NULL, NULL, &w->s), "open_session");
    for (int i = 0; i < LB_TABLES; i++)
        CHECK(w->s->open_cursor(w->s, lb_uri[i], NULL, NULL, &w->c[i]), lb_uri[i]);
    w->rng = rng;
}
static void lb_close(LbWorker *w) { CHECK(w->s->close(w->s, NULL), "session close"); }
static WT_ITEM lb_payload(LbWorker *w, size_t len) {
    for (size_t i = 0; i < len; i++) w->buf[i] = (unsigned char)xorshift(&w->rng);
    WT_ITEM v = {.data = w->buf, .size = len};
    return v;
}
static WT_ITEM lb_node_payload(LbWorker *w) {
    return lb_payload(w, LB_NODE_MIN + xorshift(&w->rng) % LB_NODE_SPAN);
}
/* A write of `c`'s current key: insert or overwrite (cursors are opened overwrite=true). */
static int lb_put_item(WT_CURSOR *c, WT_ITEM v) {
    c->set_value(c, &v);
    return c->insert(c);
}
static int lb_put_rid(WT_CURSOR *c, int64_t rid) {
    c->set_value(c, rid);
    return c->insert(c);
}
/* A count document: id1, link type, count, time, version. */
static int lb_put_count(LbWorker *w, int64_t node, int64_t count) {
    int64_t doc[5] = {node, 0, count, __atomic_load_n(&lb_clock, __ATOMIC_RELAXED), count};
    WT_ITEM v = {.data = doc, .size = sizeof doc};
    w->c[LB_COUNTS]->set_key(w->c[LB_COUNTS], node);
    return lb_put_item(w->c[LB_COUNTS], v);
}
static int lb_add_node(LbWorker *w, int64_t id) {
    WT_CURSOR *n = w->c[LB_NODES], *ni = w->c[LB_NODES_ID], *ci = w->c[LB_COUNTS_ID];
    n->set_key(n, id);
    int ret = lb_put_item(n, lb_node_payload(w));
    if (ret == 0) {
        ni->set_key(ni, id);
        ret = lb_put_rid(ni, id);
    }
    if (ret == 0) ret = lb_put_count(w, id, 0);
    if (ret == 0) {
        ci->set_key(ci, id);
        ret = lb_put_rid(ci, id);
    }
    return ret;
}
static int lb_insert_link(LbWorker *w, int64_t id1, int64_t id2, int64_t time) {
    int64_t rid = __atomic_add_fetch(&lb_next_link, 1, __ATOMIC_RELAXED);
    WT_CURSOR *l = w->c[LB_LINKS], *li = w->c[LB_LINKS_ID], *l1 = w->c[LB_LINKS_ID1];
    l->set_key(l, rid);
    int ret = lb_put_item(l, lb_payload(w, LB_LINK_BYTES));
    if (ret == 0) {
        li->set_key(li, id1, (int64_t)0, id2);
        ret = lb_put_rid(li, rid);
    }
    if (ret == 0) {
        l1->set_key(l1, id1, time, id2);
        ret = lb_put_rid(l1, rid);
    }
    return ret;
}
/* The node's first link in the id1 index: 0 and its (time, id2, rid), or WT_NOTFOUND. */
static int lb_first_link(LbWorker *w, int64_t id1, int64_t *time, int64_t *id2, int64_t *rid) {
    WT_CURSOR *l1 = w->c[LB_LINKS_ID1];
    int exact, ret;
    int64_t k1;
    l1->set_key(l1, id1, (int64_t)0, (int64_t)0);
    ret = l1->search_near(l1, &exact);
    if (ret == 0 && exact < 0) ret = l1->next(l1);
    if (ret == 0) ret = l1->get_key(l1, &k1, time, id2);
    if (ret == 0 && k1 != id1) ret = WT_NOTFOUND;
    if (ret == 0) ret = l1->get_value(l1, rid);
    return ret;
}
static int lb_read(WT_CURSOR *c, int64_t key) {
    c->set_key(c, key);
    return c->search(c);
}
static int lb_count_change(LbWorker *w, int64_t node, int delta) {
    WT_CURSOR *c = w->c[LB_COUNTS];
    WT_ITEM v;
    int64_t doc[5] = {0};
    int ret = lb_read(c, node);
    if (ret == 0) ret = c->get_value(c, &v);
    if (ret == 0 && v.size == sizeof doc) memcpy(doc, v.data, sizeof doc);
    if (ret == WT_NOTFOUND) ret = 0;
    return ret == 0 ? lb_put_count(w, node, doc[2] + delta) : ret;
}
static int lb_link_list(LbWorker *w, int64_t node) {
    int64_t time, id2, rid, k1;
    int ret = lb_first_link(w, node, &time, &id2, &rid);
    for (int i = 0; ret == 0 && i < 10; i++) {
        ret = lb_read(w->c[LB_LINKS], rid);
        if (ret == 0) ret = w->c[LB_LINKS_ID1]->next(w->c[LB_LINKS_ID1]);
        if (ret == 0) ret = w->c[LB_LINKS_ID1]->get_key(w->c[LB_LINKS_ID1], &k1, &time, &id2);
        if (ret == 0 && k1 != node) break;
        if (ret == 0) ret = w->c[LB_LINKS_ID1]->get_value(w->c[LB_LINKS_ID1], &rid);
    }
    return ret;
}
static int lb_add_link(LbWorker *w, int64_t node, int64_t now) {
    int64_t id2 = 1 + (int64_t)(xorshift(&w->rng) % (uint64_t)records);
    WT_CURSOR *li = w->c[LB_LINKS_ID];
    int64_t rid;
    li->set_key(li, node, (int64_t)0, id2);
    int ret = li->search(li);
    if (ret == 0 && (ret = li->get_value(li, &rid)) == 0) {
        /* An existing link: LinkBench's add_link overwrites its data. */
        w->c[LB_LINKS]->set_key(w->c[LB_LINKS], rid);
        return lb_put_item(w->c[LB_LINKS], lb_payload(w, LB_LINK_BYTES));
    }
    if (ret == WT_NOTFOUND) ret = lb_insert_link(w, node, id2, now);
    return ret == 0 ? lb_count_change(w, node, 1) : ret;
}
/* Removes (delete) or re-times (update: new data, new time in the id1 index) a link. */
static int lb_change_link(LbWorker *w, int64_t node, int64_t now, int delete) {
    int64_t time, id2, rid;
    WT_CURSOR *l = w->c[LB_LINKS], *li = w->c[LB_LINKS_ID], *l1 = w->c[LB_LINKS_ID1];
    int ret = lb_first_link(w, node, &time, &id2, &rid);
    if (ret == 0) ret = l1->remove(l1);
    if (ret == 0 && delete) {
        l->set_key(l, rid);
        ret = l->remove(l);
        li->set_key(li, node, (int64_t)0, id2);
        if (ret == 0) ret = li->remove(li);
        return ret == 0 ? lb_count_change(w, node, -1) : ret;
    }
    l1->set_key(l1, node, now, id2);
    if (ret == 0) ret = lb_put_rid(l1, rid);
    l->set_key(l, rid);
    return ret == 0 ? lb_put_item(l, lb_payload(w, LB_LINK_BYTES)) : ret;
}
static int lb_node_op(LbWorker *w, int op, int64_t node) {
    WT_CURSOR *n = w->c[LB_NODES], *ni = w->c[LB_NODES_ID];
    int ret;
    switch (op) {
    case GET_NODE: return lb_read(n, node);
    case ADD_NODE: return lb_add_node(w, __atomic_add_fetch(&lb_next_node, 1, __ATOMIC_RELAXED));
    case UPDATE_NODE:
        ret = lb_read(n, node);
        n->set_key(n, node);
        return ret == 0 ? lb_put_item(n, lb_node_payload(w)) : ret;
    default: /* DELETE_NODE */
        ret = lb_read(n, node);
        if (ret == 0) ret = n->remove(n);
        ni->set_key(ni, node);
        return ret == 0 ? ni->remove(ni) : ret;
    }
}
/* One LinkBench operation on `node`: 0, WT_NOTFOUND (nothing to do) or WT_ROLLBACK (retry). */
static int lb_operate(LbWorker *w, int op, int64_t node) {
    int64_t now = __atomic_add_fetch(&lb_clock, 1, __ATOMIC_RELAXED);
    int ret;
    switch (op) {
    case GET_LINK:
        w->c[LB_LINKS_ID]->set_key(w->c[LB_LINKS_ID], node, (int64_t)0,
                                   1 + (int64_t)(xorshift(&w->rng) % (uint64_t)records));
        ret = w->c[LB_LINKS_ID]->search(w->c[LB_LINKS_ID]);
        break;
    case GET_LINK_LIST: ret = lb_link_list(w, node); break;
    case COUNT_LINK: ret = lb_read(w->c[LB_COUNTS], node); break;
    case ADD_LINK: ret = lb_add_link(w, node, now); break;
    case DELETE_LINK: ret = lb_change_link(w, node, now, 1); break;
    case UPDATE_LINK: ret = lb_change_link(w, node, now, 0); break;
    default: ret = lb_node_op(w, op, node);
    }
    for (int i = 0; i < LB_TABLES; i++) w->c[i]->reset(w->c[i]);
    if (ret != 0 && ret != WT_ROLLBACK && ret != WT_NOTFOUND) die("linkbench operation", ret);
    return ret;
}
static int lb_pick(uint64_t *rng) {
    int r = (int)(xorshift(rng) % 1000), op = 0;
    while (r >= lb_weight[op]) r -= lb_weight[op++];
    return op;
}
static void *lb_run(void *arg) {
    LbWorker w;
    lb_open(&w, 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1) ^ (uint64_t)seed);
    while (!stop) {
        if (ops > 0 && __atomic_fetch_add(&ops_done, 1, __ATOMIC_RELAXED) >= ops) break;
        int64_t node = 1 + (int64_t)zipf(&w.rng);
        int op = lb_pick(&w.rng);
        for (;;) {
            CHECK(w.s->begin_transaction(w.s, NULL), "begin");
            if (lb_operate(&w, op, node) != WT_ROLLBACK) {
                CHECK(w.s->commit_transaction(w.s, NULL), "commit");
                break;
            }
            CHECK(w.s->rollback_transaction(w.s, NULL), "rollback");
        }
    }
    lb_close(&w);
    return NULL;
}
static void lb_load(WT_SESSION *s) {
    LbWorker w;
    for (int i = 0; i < LB_TABLES; i++) CHECK(s->create(s, lb_uri[i], lb_format[i]), lb_uri[i]);
    lb_open(&w, (uint64_t)seed);
    for (int64_t id = 1; id <= records; id++) {
        CHECK(lb_add_node(&w, id), "load node");
        int64_t degree = (int64_t)(xorshift(&w.rng) % LB_MAX_DEGREE);
        for (int64_t k = 0; k < degree; k++)
            CHECK(lb_insert_link(&w, id, 1 + (int64_t)(xorshift(&w.rng) % (uint64_t)records), id),
                  "load link");
        if (degree > 0) CHECK(lb_put_count(&w, id, degree), "load count");
    }
    lb_next_node = records;
    lb_clock = records;
    lb_close(&w);
}
static int64_t lb_db_bytes(const char *dir) {
    int64_t bytes = 0;
    char name[64];
    for (int i = 0; i < LB_TABLES; i++) {
        snprintf(name, sizeof name, "%s.wt", lb_uri[i] + strlen("table:"));
        bytes += file_bytes(dir, name);
    }
    return bytes;
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
    if (n == 3 && strncmp(arg, "mix", 3) == 0 && (strcmp(v, "ycsb") == 0 || strcmp(v, "linkbench") == 0)) {
        snprintf(mix, sizeof mix, "%s", v);
        return;
    }
    die(arg, -1);
}

/* The YCSB load: `records` documents in order, one thread. */
static void ycsb_load(WT_SESSION *s) {
    CHECK(s->create(s, "table:collection", "key_format=q,value_format=u"), "create collection");
    CHECK(s->create(s, "table:index", "key_format=S,value_format=q"), "create index");

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
    int linkbench = strcmp(mix, "linkbench") == 0;
    double t0 = now();
    if (linkbench)
        lb_load(s);
    else
        ycsb_load(s);
    CHECK(s->checkpoint(s, NULL), "checkpoint after load");
    double load_s = now() - t0;

    char marker[4096];
    snprintf(marker, sizeof marker, "%s/flashdoc-run-phase", dir);
    /* open(2), not fopen(3): the C library's stdio opens through internals no shim sees. */
    int m = open(marker, O_CREAT | O_WRONLY, 0644);
    if (m < 0 || close(m) != 0 || unlink(marker) != 0) die(marker, errno);

    int64_t db_bytes = linkbench ? lb_db_bytes(dir)
                                 : file_bytes(dir, "collection.wt") + file_bytes(dir, "index.wt");
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
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, linkbench ? lb_run : run, (void *)(uintptr_t)i);
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
