"""A failed fsync and a full disk, end to end, on real file systems (issue 34, section 3).

- **A real failing fsync.** Device-mapper (dm-error, dm-flakey) is not in every kernel, so the
  failing device is a thin one built from parts every Linux has: an ext4 file system on a loop
  device whose backing file is sparse and lives on a tmpfs smaller than the image. Once the
  test fills that tmpfs, the loop device can no longer store a block it has not stored before:
  writeback fails, and the kernel's fsync returns the error (ENOSPC from the device, or EIO) —
  as a thin-provisioned volume that runs out of space does. A retried fsync would then return
  success for data that is gone ("fsyncgate"); the server must refuse every write from the
  first failure on, keep serving reads, and recover after a restart every write it
  acknowledged with j:true.
- **A real ENOSPC.** A small ext4 image, loop-mounted (tmpfs ignores fsync), filled by j:true
  inserts until the disk is full: writes fail with OutOfDiskSpace (14031), reads go on, nothing
  acknowledged is lost, and once the test deletes a filler file it placed on the same file
  system at the start, writes resume without a restart.

Both need root and loop devices. Without them the tests FAIL, naming what is missing, unless
FLASHDOC_ALLOW_NO_LOOP_DEVICE=1 states that this machine has none (then they are skipped with
that reason). Mounts and loop devices are always removed, even when a test fails.
"""
import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
import time

import pytest
from pymongo import WriteConcern
from pymongo.errors import PyMongoError

from conftest import ENGINE, Server, serve_argv

OPT_OUT = "FLASHDOC_ALLOW_NO_LOOP_DEVICE"
OUT_OF_DISK_SPACE = 14031
WRITES_REFUSED = 8
# The journal file a failed sync names: the in-place engine's are MMAPv1's `j._N`.
JOURNAL_FILE = "j._" if ENGINE == "mmapv1" else "FlashdocLog"


def require_loop_devices():
    """Fails the test when it cannot run here, unless the opt-out says this machine lacks it."""
    missing = None
    if os.geteuid() != 0:
        missing = "root (mount, losetup)"
    elif not os.path.exists("/dev/loop-control"):
        missing = "loop devices (/dev/loop-control)"
    else:
        for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
            if shutil.which(tool) is None:
                missing = f"the {tool} command"
                break
    if missing is None:
        return
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"not run: this machine has no {missing} ({OPT_OUT}=1)")
    pytest.fail(
        f"this durability test needs {missing}; run it as root on a machine with loop devices, "
        f"or set {OPT_OUT}=1 to state that this machine has none"
    )


def sh(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
    return r.stdout.strip()


def unmount(path):
    """Unmounts, retrying while the file system is still busy; lazily as the last resort."""
    for _ in range(50):
        if subprocess.run(["umount", path], capture_output=True).returncode == 0:
            return
        if subprocess.run(["mountpoint", "-q", path]).returncode != 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", path], capture_output=True)


@contextlib.contextmanager
def tmpfs(size_mb):
    d = tempfile.mkdtemp(prefix="flashdoc-thin-")
    try:
        sh("mount", "-t", "tmpfs", "-o", f"size={size_mb}M", "tmpfs", d)
        try:
            yield d
        finally:
            unmount(d)
    finally:
        os.rmdir(d)


@contextlib.contextmanager
def ext4_on_loop(size_mb, backing_dir, *mkfs_options):
    """A fresh ext4 file system on a loop device over a sparse file in `backing_dir`; yields
    (mount point, remount), where remount() unmounts and mounts it again (the page cache of
    the file system is then empty: what is read comes from the device)."""
    with contextlib.ExitStack() as stack:
        img = os.path.join(backing_dir, "ext4.img")
        with open(img, "wb") as f:
            f.truncate(size_mb << 20)
        stack.callback(os.remove, img)
        loop = sh("losetup", "--find", "--show", img)
        stack.callback(subprocess.run, ["losetup", "-d", loop], capture_output=True)
        sh("mkfs.ext4", "-q", "-F", *mkfs_options, loop)
        mnt = tempfile.mkdtemp(prefix="flashdoc-ext4-")
        stack.callback(os.rmdir, mnt)
        sh("mount", loop, mnt)
        stack.callback(unmount, mnt)

        def remount():
            unmount(mnt)
            sh("mount", loop, mnt)

        yield mnt, remount


def config_file(directory, text):
    path = os.path.join(directory, "flashdoc.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def start(stack, dbpath, cfg):
    s = Server(dbpath, extra_args=["-f", cfg])
    try:
        s.start()
    except RuntimeError:
        # Run it again to show why it would not start (the fixture does not keep the lines).
        r = subprocess.run(
            serve_argv("--dbpath", dbpath, "--port", "0", "-f", cfg),
            capture_output=True, text=True, timeout=60,
        )
        pytest.fail(f"the server did not start on {dbpath}: {r.stdout[:3000]}{r.stderr[:3000]}")
    stack.callback(lambda: s.proc.poll() is None and s.kill())
    return s


def error_of(exc):
    """(code, message) of a pymongo write or command error."""
    details = getattr(exc, "details", None) or {}
    write_errors = details.get("writeErrors") or []
    if write_errors:
        return write_errors[0].get("code"), write_errors[0].get("errmsg", "")
    return getattr(exc, "code", None), str(exc)


def insert_j(coll, doc):
    """Inserts with j:true; returns None when acknowledged, else (code, message)."""
    try:
        coll.insert_one(doc)
        return None
    except PyMongoError as e:
        return error_of(e)


def fill_backing(directory):
    """Writes a file in `directory` until its file system is full."""
    chunk = b"\0" * (1 << 20)
    with open(os.path.join(directory, "filler"), "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def acked_ids_present(coll, acked):
    got = {d["_id"] for d in coll.find({}, {"_id": 1})}
    missing = [i for i in acked if i not in got]
    assert not missing, f"{len(missing)} acknowledged documents lost, e.g. {missing[:5]}"


def test_a_failed_fsync_refuses_writes_until_a_restart_that_recovers_what_was_durable():
    require_loop_devices()
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="flashdoc-fsync-"))
        back = stack.enter_context(tmpfs(96))
        # The ext4 journal and inode tables are written out by mkfs, so they have their space
        # on the tmpfs: only blocks the database writes for the first time fail.
        mnt, remount = stack.enter_context(
            ext4_on_loop(512, back, "-E", "lazy_itable_init=0,lazy_journal_init=0")
        )
        dbpath = os.path.join(mnt, "db")
        os.mkdir(dbpath)
        cfg = config_file(work, "storage:\n  syncPeriodSecs: 0\n")
        s = start(stack, dbpath, cfg)
        c = s.client()
        coll = c["fs"]["docs"].with_options(write_concern=WriteConcern(j=True))
        acked = []
        for i in range(300):
            assert insert_j(coll, {"_id": i, "payload": os.urandom(2048)}) is None
            acked.append(i)

        acked_before_failure = list(acked)
        fill_backing(back)
        failure = None
        for i in range(300, 5300):
            failure = insert_j(coll, {"_id": i, "payload": os.urandom(8192)})
            if failure is not None:
                break
            acked.append(i)
        assert failure is not None, "no write failed with the device full"
        code, msg = failure
        assert code == WRITES_REFUSED, failure
        assert "writes are refused" in msg and JOURNAL_FILE in msg, msg
        assert "ENOSPC" in msg or "EIO" in msg, msg

        # From now on every write is refused with the same cause, j:true or not; reads go on.
        for wc in (WriteConcern(j=True), WriteConcern(w=1)):
            refused = insert_j(c["fs"]["docs"].with_options(write_concern=wc), {"_id": "late"})
            assert refused is not None and refused[0] == WRITES_REFUSED, refused
            assert "writes are refused" in refused[1], refused
        acked_ids_present(coll, acked)
        status = c.admin.command("serverStatus")["storageEngine"]
        assert status["writesRefused"] is True, status
        cause = status["writeFailure"]
        assert cause["operation"] in ("fdatasync", "fsync"), cause
        assert cause["errnoName"] in ("ENOSPC", "EIO"), cause
        time.sleep(0.5)
        errors = [line for line in s.log if " E STORAGE" in line]
        assert len(errors) == 1 and "every write is refused" in errors[0], errors
        assert cause["file"] in errors[0], errors
        c.close()
        s.stop()

        # The device has room again; the page cache is dropped with the unmount, so the
        # restarted server reads what the device holds.
        os.remove(os.path.join(back, "filler"))
        remount()
        s = start(stack, dbpath, cfg)
        c = s.client()
        coll = c["fs"]["docs"].with_options(write_concern=WriteConcern(j=True))
        # Every write acknowledged before the device failed is there. The writes acknowledged
        # after the test filled the tmpfs are not checked: on this kernel the first fdatasync
        # after the backing store fills can return success although its data never reaches
        # the device (the same happens without flashdoc: a probe that writes and fdatasyncs a
        # preallocated file the same way loses that record after a remount). No database can
        # keep what the kernel acknowledged and lost; it can only never retry after the error.
        acked_ids_present(coll, acked_before_failure)
        assert len(acked) - len(acked_before_failure) <= 1, acked[len(acked_before_failure):]
        assert c["fs"]["docs"].find_one({"_id": "late"}) is None
        assert insert_j(coll, {"_id": "after-restart"}) is None
        assert c.admin.command("serverStatus")["storageEngine"]["writesRefused"] is False
        c.close()
        s.stop()


def test_a_full_disk_refuses_writes_then_they_resume_once_space_is_freed():
    require_loop_devices()
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="flashdoc-enospc-"))
        # The journal preallocates 100 MiB files: the image holds one and some data.
        mnt, remount = stack.enter_context(ext4_on_loop(224, work))
        filler = os.path.join(mnt, "filler")
        sh("fallocate", "-l", "24M", filler)
        # Freed before the restart: the checkpoints after the first one fill the disk again,
        # and an open needs a block for its new journal file.
        spare = os.path.join(mnt, "spare")
        sh("fallocate", "-l", "48M", spare)
        dbpath = os.path.join(mnt, "db")
        os.mkdir(dbpath)
        # A small cache and a checkpoint every second: table files grow as the journal does.
        cfg = config_file(
            work,
            "storage:\n  syncPeriodSecs: 1\n  wiredTiger:\n    engineConfig:\n"
            "      cacheSizeGB: 0.03\n",
        )
        s = start(stack, dbpath, cfg)
        c = s.client()
        coll = c["fs"]["docs"].with_options(write_concern=WriteConcern(j=True))
        acked = []
        failure = None
        for i in range(4000):
            failure = insert_j(coll, {"_id": i, "payload": os.urandom(64 << 10)})
            if failure is not None:
                break
            acked.append(i)
        assert failure is not None, "the disk never filled"
        code, msg = failure
        assert code == OUT_OF_DISK_SPACE, failure
        assert "No space left on device" in msg, msg
        assert s.proc.poll() is None, "the server keeps running on a full disk"

        # Still full: refused again with the same clear error; reads go on; not sticky.
        refused = insert_j(coll, {"_id": "while-full", "payload": os.urandom(64 << 10)})
        assert refused is not None and refused[0] == OUT_OF_DISK_SPACE, refused
        acked_ids_present(coll, acked)
        assert coll.find_one({"_id": acked[-1]})["_id"] == acked[-1]
        status = c.admin.command("serverStatus")["storageEngine"]
        assert status["writesRefused"] is False, status

        # Space is freed: writes resume without a restart.
        os.remove(filler)
        # A fresh _id per attempt: a refused insert was not acknowledged, but the journal's
        # retry may still make it durable (as a write whose write concern failed).
        deadline = time.time() + 60
        resumed = None
        attempt = 0
        while time.time() < deadline:
            attempt += 1
            resumed = insert_j(coll, {"_id": f"resumed-{attempt}", "payload": b"small"})
            if resumed is None:
                break
            assert resumed[0] == OUT_OF_DISK_SPACE, resumed
            time.sleep(0.2)
        assert resumed is None, f"writes did not resume once space was freed: {resumed}"
        acked.append(f"resumed-{attempt}")
        for i in range(20):
            assert insert_j(coll, {"_id": f"more-{i}", "payload": os.urandom(4096)}) is None
            acked.append(f"more-{i}")
        c.close()

        # Nothing acknowledged is lost, even through a SIGKILL and a remount.
        s.kill()
        os.remove(spare)
        remount()
        s = start(stack, dbpath, cfg)
        c = s.client()
        acked_ids_present(c["fs"]["docs"], acked)
        c.close()
        s.stop()
