"""untrusted: reading and writing a tree the model's code has had its hands on (the working copy, the gate's copy).

Every path is walked from the tree's top one folder at a time (openat with O_NOFOLLOW), so a link swapped in
anywhere on the way leads nowhere; only regular files and folders are opened (a FIFO does not block, a link to
/dev/zero or into /proc is never read); every read has a bound; new files are made under a fresh name with
O_EXCL, so a link left under the name a write would use is never written through. What breaks these rules is
the model's code's doing: `Untrusted`, with one line saying what was found; the keeper then rebuilds the tree.
"""
import os
import secrets
import shutil
import stat
import subprocess

from .names import refusal

MAX_DEPTH = 32          # folders within folders; deeper is not a codebase
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Untrusted(Exception):
    """The tree holds what the keeper will not take: a link, a FIFO, too much, too deep; one line says what."""


def scan(top, skip=lambda rel, is_folder: False, max_files=None, max_bytes=None, folders=None):
    """{path: lstat} of the regular files beneath top (relative, "/"-separated), not entering what `skip` says;
    Untrusted on anything else (a link, a device, a FIFO, a name that is not printable text or is too long: see
    names.py), or past the bounds (files and folders; bytes). `folders`, when given, gets {folder: its mode} of
    every folder entered."""
    max_files, max_bytes = max_files or 1 << 62, max_bytes or 1 << 62
    found, total, entries, pending = {}, 0, 0, [""]
    while pending:
        prefix = pending.pop()
        fd = open_folder(top, prefix)
        try:
            for entry in os.scandir(fd):
                rel, entries = prefix + entry.name, entries + 1
                if why := refusal(rel, visible_only=False):
                    raise Untrusted(why)
                if entries > max_files:
                    raise Untrusted(f"more than {max_files:,} files and folders")
                info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    if folders is not None:
                        folders[rel] = info.st_mode
                    if not skip(rel, True):
                        if rel.count("/") >= MAX_DEPTH:
                            raise Untrusted(f"{rel}/: folders more than {MAX_DEPTH} deep")
                        pending.append(rel + "/")
                elif not stat.S_ISREG(info.st_mode):
                    raise Untrusted(f"{rel}: {kind_of(info.st_mode)}, not a file (only files and folders are taken)")
                elif not skip(rel, False):
                    found[rel], total = info, total + info.st_size
                    if total > max_bytes:
                        raise Untrusted(f"more than {max_bytes >> 20:,} MB of files")
        except OSError as error:
            raise Untrusted(f"{prefix or './'}: cannot be listed ({error.strerror})") from None
        finally:
            os.close(fd)
    return found


def read(top, rel, limit):
    """A regular file's bytes, at most `limit` of them (more is Untrusted)."""
    folder, name = walk(top, rel)
    try:
        fd = open_at(folder, name, FILE, f"{rel}: cannot be read")
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"{rel}: {kind_of(info.st_mode)}, not a file")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Untrusted(f"{rel}: larger than {limit:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def write(top, rel, data):
    """Make top/rel hold `data`, whole or not at all, whatever stood on the way (a link, a folder, a FIFO)."""
    folder, name = walk(top, rel, make=True)
    try:
        temporary = f".{secrets.token_hex(8)}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=folder)
        try:
            with os.fdopen(fd, "wb", closefd=False) as file:
                file.write(data)
        finally:
            os.close(fd)
        clear(folder, name, os.path.join(top, rel), keep_file=True)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def remove(top, rel):
    """Take top/rel away (a file, a link, or a whole folder), and the folders it leaves empty."""
    try:
        folder, name = walk(top, rel)
    except (Untrusted, FileNotFoundError):
        return
    try:
        clear(folder, name, os.path.join(top, rel))
    finally:
        os.close(folder)
    parts = rel.split("/")[:-1]
    while parts:
        try:
            os.rmdir(os.path.join(top, *parts))
        except OSError:
            return
        parts.pop()


def holds_file(top, rel):
    """Whether top/rel is a regular file, reached without links."""
    try:
        folder, name = walk(top, rel)
    except (Untrusted, FileNotFoundError):
        return False
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False
    finally:
        os.close(folder)


def wipe(top):
    """Remove a whole tree, whatever the model's code did to its modes or its depth."""
    def unlock_and_retry(function, path, _):
        parent = os.path.dirname(path)
        if stat.S_ISDIR(os.lstat(parent).st_mode):
            os.chmod(parent, 0o700)
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, 0o700)
        function(path)
    if not os.path.lexists(top):
        return
    if not os.path.isdir(top) or os.path.islink(top):
        os.unlink(top)
        return
    try:
        shutil.rmtree(top, onerror=unlock_and_retry)
    except (RecursionError, OSError):  # deeper than Python's recursion, or than a path can name: the system's tools
        for tool in (["chmod", "-R", "u+rwx", "--", str(top)], ["rm", "-rf", "--", str(top)]):  # walk with openat
            subprocess.run(tool, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if os.path.lexists(top):
            raise OSError(f"cannot remove {top}: remove it by hand") from None


# --- walking ------------------------------------------------------------------------------------
def walk(top, rel, make=False):
    """(an open fd of rel's folder, rel's last name), entering no link; with make, missing folders are made
    and anything in the way of one is replaced."""
    *folders, name = rel.split("/")
    fd = os.open(top, FOLDER)
    try:
        for n, part in enumerate(folders):
            if make:
                try:
                    info = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISDIR(info.st_mode):
                        clear(fd, part, os.path.join(top, *folders[:n + 1]))
                        raise FileNotFoundError
                except FileNotFoundError:
                    os.mkdir(part, 0o755, dir_fd=fd)
            inner = open_at(fd, part, FOLDER, f"{rel}: its folder {part}/ cannot be entered")
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def open_at(folder, name, flags, why):
    """os.open of a name in an open folder: FileNotFoundError when it is missing, Untrusted on any other refusal."""
    try:
        return os.open(name, flags, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise Untrusted(f"{why} ({error.strerror})") from None


def open_folder(top, prefix):
    """An open fd of the folder top/prefix ("" or "a/b/"), entering no link."""
    try:
        if not prefix:
            return os.open(top, FOLDER)
        fd, name = walk(top, prefix.rstrip("/"))
        try:
            return os.open(name, FOLDER, dir_fd=fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise Untrusted(f"{prefix or './'}: cannot be entered ({error.strerror})") from None


def clear(folder, name, path, keep_file=False):
    """Take away what stands at `name` in the open `folder` (whose path to it is `path`): a folder whole (the
    model's code has ended: nothing swaps it meanwhile), anything else unlinked; a file only if not keep_file
    (os.replace replaces a file in one step)."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        wipe(path)
    elif not (keep_file and stat.S_ISREG(info.st_mode)):
        os.unlink(name, dir_fd=folder)


def kind_of(mode):
    return {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
            stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}.get(stat.S_IFMT(mode), "not a file")
