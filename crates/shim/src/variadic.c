/* The shim's variadic interposers: open, open64, openat, openat64, fcntl, fcntl64, and glibc's
 * _FORTIFY_SOURCE entry points __open_2, __open64_2, __openat_2, __openat64_2.
 *
 * Each calls the next definition of the same symbol (the C library's, found with
 * dlsym(RTLD_NEXT)) with the caller's arguments unchanged, then tells the Rust side what
 * happened (flashdoc_shim_opened / flashdoc_shim_duped), and returns the real result with the
 * real errno. The Rust hooks are weak references: a binary that links this object without the
 * Rust side (the crate's own unit-test harness) just passes every call through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

extern void flashdoc_shim_opened(int fd, int flags) __attribute__((weak));
extern void flashdoc_shim_duped(int oldfd, int newfd) __attribute__((weak));

/* Resolves `name` once per call site; racing threads store the same pointer. */
static void *next_symbol(void **slot, const char *name) {
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (p == NULL) {
        p = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    }
    return p;
}

#define NEXT(type, name)                                            \
    static void *slot_;                                             \
    type real_ = (type)next_symbol(&slot_, name);                   \
    if (real_ == NULL) {                                            \
        errno = ENOSYS;                                             \
        return -1;                                                  \
    }

static int needs_mode(int flags) {
    return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
}

static int opened(int fd, int flags) {
    if (fd >= 0 && flashdoc_shim_opened != NULL) {
        int saved = errno;
        flashdoc_shim_opened(fd, flags);
        errno = saved;
    }
    return fd;
}

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
typedef int (*fcntl_fn)(int, int, ...);

#define DEFINE_OPEN(sym)                                  \
    int sym(const char *path, int flags, ...) {           \
        mode_t mode = 0;                                  \
        if (needs_mode(flags)) {                          \
            va_list ap;                                   \
            va_start(ap, flags);                          \
            mode = va_arg(ap, mode_t);                    \
            va_end(ap);                                   \
        }                                                 \
        NEXT(open_fn, #sym)                               \
        return opened(real_(path, flags, mode), flags);   \
    }

#define DEFINE_OPENAT(sym)                                       \
    int sym(int dirfd, const char *path, int flags, ...) {       \
        mode_t mode = 0;                                         \
        if (needs_mode(flags)) {                                 \
            va_list ap;                                          \
            va_start(ap, flags);                                 \
            mode = va_arg(ap, mode_t);                           \
            va_end(ap);                                          \
        }                                                        \
        NEXT(openat_fn, #sym)                                    \
        return opened(real_(dirfd, path, flags, mode), flags);   \
    }

#define DEFINE_OPEN_2(sym)                          \
    int sym(const char *path, int flags) {          \
        NEXT(open2_fn, #sym)                        \
        return opened(real_(path, flags), flags);   \
    }

#define DEFINE_OPENAT_2(sym)                              \
    int sym(int dirfd, const char *path, int flags) {     \
        NEXT(openat2_fn, #sym)                            \
        return opened(real_(dirfd, path, flags), flags);  \
    }

/* glibc's own fcntl reads its third argument as a pointer for every command, so passing it on
 * as one is exactly what the C library does with it. */
#define DEFINE_FCNTL(sym)                                                     \
    int sym(int fd, int cmd, ...) {                                           \
        va_list ap;                                                           \
        va_start(ap, cmd);                                                    \
        void *arg = va_arg(ap, void *);                                       \
        va_end(ap);                                                           \
        NEXT(fcntl_fn, #sym)                                                  \
        int ret = real_(fd, cmd, arg);                                        \
        if (ret >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&         \
            flashdoc_shim_duped != NULL) {                                    \
            int saved = errno;                                                \
            flashdoc_shim_duped(fd, ret);                                     \
            errno = saved;                                                    \
        }                                                                     \
        return ret;                                                           \
    }

DEFINE_OPEN(open)
DEFINE_OPEN(open64)
DEFINE_OPENAT(openat)
DEFINE_OPENAT(openat64)
DEFINE_OPEN_2(__open_2)
DEFINE_OPEN_2(__open64_2)
DEFINE_OPENAT_2(__openat_2)
DEFINE_OPENAT_2(__openat64_2)
DEFINE_FCNTL(fcntl)
DEFINE_FCNTL(fcntl64)

/* Referenced from Rust so that the linker keeps this object in the cdylib. */
void flashdoc_shim_c_anchor(void) {}
