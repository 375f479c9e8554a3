/* Exercises every call the shim interposes, in a fixed order, for crates/shim/tests/calls.rs.
 * It checks for itself that results and errno pass through unchanged (exit 1 names the
 * check); the Rust test checks the trace the shim made of it.
 * usage: calls DIR (the database directory; the program works inside it) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static char buf[8192];

#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "calls.c:%d: %s (errno %d)\n", __LINE__, #cond, errno); \
            exit(1);                                                    \
        }                                                               \
    } while (0)

/* The call fails with exactly this errno. */
#define FAILS(call, err)                    \
    do {                                    \
        errno = 0;                          \
        CHECK((call) == -1 && errno == err); \
    } while (0)

static int threaded_fd;

static void *writer(void *arg) {
    long t = (long)arg;
    for (long i = 0; i < 500; i++)
        CHECK(pwrite(threaded_fd, buf, 512, (t * 500 + i) * 512) == 512);
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 2 && chdir(argv[1]) == 0);
    memset(buf, 'x', sizeof buf);
    struct iovec iov[2] = {{buf, 100}, {buf, 200}};

    int fd = open("a.wt", O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, buf, 4096, 0) == 4096);              /* 4096 @ 0 */
    CHECK(pwritev(fd, iov, 2, 4096) == 300);              /* 300 @ 4096 */
    CHECK(pwritev2(fd, iov, 2, -1, 0) == 300);            /* 300 @ 0 (the file position) */
    CHECK(lseek(fd, 10000, SEEK_SET) == 10000);
    CHECK(write(fd, buf, 50) == 50);                      /* 50 @ 10000 */
    CHECK(writev(fd, iov, 2) == 300);                     /* 300 @ 10050 */
    int d = dup(fd);
    CHECK(d >= 0 && pwrite64(d, buf, 10, 20000) == 10);   /* 10 @ 20000 */
    int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
    CHECK(d2 >= 100 && pwrite(d2, buf, 10, 30000) == 10); /* 10 @ 30000 */
    CHECK(dup2(fd, 60) == 60 && pwrite(60, buf, 10, 40000) == 10); /* 10 @ 40000 */
    CHECK(dup3(fd, 61, O_CLOEXEC) == 61 && pwrite(61, buf, 10, 41000) == 10); /* 10 @ 41000 */
    CHECK(close(fd) == 0 && close(d2) == 0 && close(60) == 0 && close(61) == 0);
    CHECK(pwrite(d, buf, 1, 50000) == 1);                 /* 1 @ 50000, through the dup */
    CHECK(ftruncate(d, 45000) == 0);                      /* truncate to 45000 */
    CHECK(fallocate(d, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0); /* Free */
    CHECK(fallocate(d, 0, 0, 65536) == 0);                /* an allocation: no event */
    CHECK(fdatasync(d) == 0);                             /* a checkpointed file's sync */

    /* Errors pass through with their errno, and leave no event. */
    FAILS(pwrite(-1, buf, 1, 0), EBADF);
    FAILS(pwrite(d, buf, 1, -5), EINVAL);
    FAILS(write(-1, buf, 1), EBADF);
    FAILS(open("missing/x", O_RDONLY), ENOENT);
    FAILS(openat(AT_FDCWD, "missing/x", O_RDONLY), ENOENT);
    FAILS(rename("nope", "x"), ENOENT);
    FAILS(renameat2(AT_FDCWD, "a.wt", AT_FDCWD, "a.wt", RENAME_NOREPLACE), EEXIST);
    FAILS(unlink("nope"), ENOENT);
    FAILS(fsync(-1), EBADF);
    FAILS(fdatasync(-1), EBADF);
    FAILS(ftruncate(-1, 0), EBADF);
    FAILS(close(-1), EBADF);
    FAILS(dup(-1), EBADF);
    FAILS(fcntl(-1, F_GETFL), EBADF);
    int ro = open("a.wt", O_RDONLY);
    CHECK(ro >= 0);
    FAILS(pwrite(ro, buf, 1, 0), EBADF);                  /* a followed file, read-only */
    CHECK((fcntl(ro, F_GETFL) & O_ACCMODE) == O_RDONLY); /* fcntl's result passes through */
    CHECK(close(ro) == 0);

    /* The turtle dance: write a temporary, sync, rename over the old one. */
    int t = openat(AT_FDCWD, "WiredTiger.turtle.set", O_CREAT | O_WRONLY | O_EXCL, 0644);
    CHECK(t >= 0 && write(t, "turtle", 6) == 6 && fsync(t) == 0 && close(t) == 0);
    CHECK(rename("WiredTiger.turtle.set", "WiredTiger.turtle") == 0); /* commit of the open Begin */
    t = open("b.set", O_CREAT | O_WRONLY, 0644);
    CHECK(t >= 0 && write(t, "b", 1) == 1 && close(t) == 0);
    CHECK(renameat(AT_FDCWD, "b.set", AT_FDCWD, "a.wt") == 0); /* replaces a.wt */
    CHECK(unlink("a.wt") == 0);                           /* removes b.set's inode */
    CHECK(pwrite(d, buf, 1, 0) == 1);                     /* a.wt's old inode: no longer a file */
    CHECK(close(d) == 0);

    /* A file outside the database directory is not followed. */
    char outside[64];
    snprintf(outside, sizeof outside, "../outside-%d", (int)getpid());
    int o = open(outside, O_CREAT | O_WRONLY, 0644);
    CHECK(o >= 0 && write(o, "o", 1) == 1 && close(o) == 0 && unlink(outside) == 0);

    /* Threads writing one file at once. */
    threaded_fd = creat("m.wt", 0644);
    CHECK(threaded_fd >= 0);
    pthread_t th[4];
    for (long i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, writer, (void *)i) == 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(th[i], NULL) == 0);
    CHECK(close(threaded_fd) == 0);
    printf("ok\n");
    return 0;
}
