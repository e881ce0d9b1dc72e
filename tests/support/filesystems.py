"""Real file systems that fail the way disks do, for the machine-fault tests.

    small_tmpfs(path, size)   a tmpfs of `size` bytes: an honest full disk (ENOSPC), and
                              `grow(size)` frees room again without touching what is there
    read_only_bind(src, dst)  `src` seen read-only at `dst` (EROFS from the first write)
    Ext4Image(path)           an ext4 file system on a loop device, mounted with
                              `errors=remount-ro`: `fail()` raises a file-system error in the
                              kernel (ext4 then remounts read-only under its writers: EROFS
                              mid-run, as a disk error does), `shut_down()` is ext4's own
                              EXT4_IOC_SHUTDOWN (every later I/O is EIO, as a lost disk's),
                              `mend()` what a person does next (unmount, e2fsck, mount)

Each needs root (mount); the tests that use them are skipped where mounting is not allowed.
Everything is unmounted (lazily, should a process still hold it) when the block ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_DEFAULT = 0  # everything written so far is synced first, then the disk is gone


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def _mount(*argv: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a file system needs root")
    done = _run("mount", *argv)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")


def _unmount(path: Path) -> None:
    if _run("umount", str(path)).returncode != 0:
        _run("umount", "-l", str(path))


class Tmpfs:
    def __init__(self, path: Path) -> None:
        self.path = path

    def grow(self, size: int) -> None:
        """Room again: the same file system, `size` bytes large, its files untouched."""
        done = _run("mount", "-o", f"remount,size={size}", str(self.path))
        assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def small_tmpfs(path: Path, size: int):
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    try:
        yield Tmpfs(path)
    finally:
        _unmount(path)


@contextlib.contextmanager
def read_only_bind(src: Path, dst: Path):
    dst.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(src), str(dst))
    try:
        done = _run("mount", "-o", "remount,bind,ro", str(dst))
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {done.stderr.strip()}")
        yield dst
    finally:
        _unmount(dst)


class Ext4Image:
    """See the module docstring. Use as a context manager: mounted inside, gone after."""

    def __init__(self, path: Path, size_mb: int = 32) -> None:
        self.image = path.with_suffix(".img")
        self.path = path
        self.size_mb = size_mb
        self.device: str | None = None

    def __enter__(self) -> Ext4Image:
        if shutil.which("mkfs.ext4") is None:
            pytest.skip("mkfs.ext4 is not installed")
        with open(self.image, "wb") as f:
            f.truncate(self.size_mb * 1024 * 1024)
        made = _run("mkfs.ext4", "-q", "-F", str(self.image))
        if made.returncode != 0:
            pytest.skip(f"cannot make an ext4 image: {made.stderr.strip()}")
        self.path.mkdir(parents=True, exist_ok=True)
        _mount("-o", "loop,errors=remount-ro", str(self.image), str(self.path))
        found = _run("findmnt", "-n", "-o", "SOURCE", str(self.path))
        self.device = os.path.basename(found.stdout.strip())
        return self

    def fail(self) -> None:
        """A file-system error: ext4 remounts itself read-only (errors=remount-ro)."""
        trigger = Path(f"/sys/fs/ext4/{self.device}/trigger_fs_error")
        if not trigger.exists():
            pytest.skip("this kernel's ext4 has no trigger_fs_error")
        trigger.write_text("workqueue test: a disk error\n")

    def shut_down(self) -> None:
        """ext4's shutdown ioctl: from now on every read and write gives EIO."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_DEFAULT))
        finally:
            os.close(fd)

    def mend(self) -> None:
        """What a person does after the fault: unmount, check the file system, mount again."""
        _unmount(self.path)
        _run("e2fsck", "-fy", str(self.image))
        _mount("-o", "loop,errors=remount-ro", str(self.image), str(self.path))
        found = _run("findmnt", "-n", "-o", "SOURCE", str(self.path))
        self.device = os.path.basename(found.stdout.strip())

    def __exit__(self, *exc) -> None:
        _unmount(self.path)
        with contextlib.suppress(OSError):
            self.image.unlink()
