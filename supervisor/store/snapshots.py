"""snapshots: the codebase's history, content-addressed, in backups/.

A snapshot is backups/NNNN.json: {folder: sha256 of its listing}, where a folder's listing is {file name:
sha256 of its content}. Listings and contents are immutable objects in backups/objects/ named by their
sha256, each kept once, so a snapshot stores only the files and listings that changed. Restores copy
objects out, so editing the codebase never changes a backup. backups/index.json lists the snapshots (id,
time, iteration, kind, known good, digest, file count). The codebase is every file of the folder but the
keeper's and the person's (settings.NOT_YOURS), names outside the allow-list (names.py) and a person's virtual
environment (`of_a_venv`: a folder holding pyvenv.cfg, at any depth, and, when the folder itself is one, what
`python -m venv .` makes at its top): never shown to the model, copied, snapshotted or landed over.
"""
import gzip
import hashlib
import json
import os
import shutil
import time
from collections import Counter, OrderedDict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ..events import tell
from ..names import refusal
from ..untrusted import Untrusted
from ..settings import (BACKUPS, BACKUPS_BYTES, GUARDED, INDEX, KEEP_DAILY_DAYS, KEEP_GOOD, KEEP_LANDED_DAYS, KEEP_LAST,
                        NOT_CODE, OBJECTS, RESTORING, ROOT, STEERING, load_json, stamp, utc_now, write_atomically)


VENV = {"bin", "lib", "lib64", "include", "share", "pyvenv.cfg"}  # what `python -m venv .` makes in a folder


def codebase_files(root=ROOT):
    """(path, DirEntry) of each file of the codebase in root (the folder, or the working copy): all but the
    keeper's and the person's files and folders, a virtual environment (of_a_venv), and any name outside the
    allow-list (names.py: .env and its copies, .git, any name that starts with ".", Finder's "Icon\r"): never
    judged, never landed."""
    skip, cut, folders = {p.casefold() for p in GUARDED + STEERING}, len(str(root)) + 1, [str(root)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                rel, folder = entry.path[cut:], entry.is_dir(follow_symlinks=False)
                if refusal(rel) or of_a_venv(rel, folder, lambda path: os.path.isfile(f"{root}/{path}/pyvenv.cfg")):
                    continue
                if folder:  # a symlink is neither a folder nor a file here
                    if entry.name.casefold() not in NOT_CODE:
                        folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False) and rel.casefold() not in skip:
                    yield rel, entry  # POSIX only, so the separator is already "/"


def of_a_venv(rel, folder, holds_cfg):
    """Whether the path rel is a virtual environment's, which is the person's and never the codebase's, wherever
    the model's code would put one: a pyvenv.cfg, a folder that holds one (holds_cfg(rel), or in the person's
    folder), and, when the person's folder itself is one (python -m venv .), the names venv makes at its top (VENV,
    in any case)."""
    name = rel.rsplit("/", 1)[-1].casefold()
    return name == "pyvenv.cfg" or folder and (holds_cfg(rel) or is_file(ROOT / rel / "pyvenv.cfg")) or \
        "/" not in rel and name in VENV and is_file(ROOT / "pyvenv.cfg")


def is_file(path):
    """Whether the path names a file (False too where it cannot: a path longer than the system takes, a file on
    the way)."""
    try:
        return path.is_file()
    except OSError:
        return False


def digest_of(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(root=ROOT):
    """{path: sha256} of the codebase in root. A file is read again only if its size or mtime changed since
    it was hashed; one changed within a second of being hashed is not trusted by its stat at all (too close
    for a coarse clock to tell two writes apart)."""
    files, began, known_here, now_here = {}, time.time_ns(), seen.get(str(root), {}), {}
    for rel, entry in codebase_files(root):
        stat = entry.stat()
        known = known_here.get(rel)
        if known and known[0] == stat.st_size and known[1] == stat.st_mtime_ns:
            files[rel], now_here[rel] = known[2], known
        else:
            files[rel] = digest_of(root / rel)
            if stat.st_mtime_ns < began - 10**9:
                now_here[rel] = (stat.st_size, stat.st_mtime_ns, files[rel])
    seen[str(root)] = now_here  # the files there now: what was deleted is forgotten, so the cache stays its size
    return files


seen = {}  # root -> {path: (size, mtime, sha256)}: what manifest() need not read again


def line_changes(old, new):
    """(added, removed) line counts between two texts, in linear time (a moved line counts as kept)."""
    a, b = Counter(old.splitlines()), Counter(new.splitlines())
    return sum((b - a).values()), sum((a - b).values())


def changes_since(entry, root=ROOT):
    """[(path, "new" | "changed" | "deleted", added, removed)] from a snapshot to the codebase in root now."""
    now, then = manifest(root), files_of(entry)
    found = []
    for rel in sorted({rel for rel, _ in now.items() ^ then.items()}):
        old = text_of(then[rel]) if rel in then else ""
        new = (root / rel).read_text("utf-8", "replace") if rel in now else ""
        kind = "new" if rel not in then else "deleted" if rel not in now else "changed"
        found.append((rel, kind, *line_changes(old, new)))
    return found


def text_of(sha):
    """An object's text ("" when the store lost it: a count of lines is not worth a stop)."""
    try:
        return object_path(sha).read_text("utf-8", "replace")
    except FileNotFoundError:
        return ""


def edited_since(entry, paths):
    """Whether any of these files in the folder differs from the snapshot (read: only they are)."""
    then = files_of(entry)
    return any((digest_of(ROOT / rel) if (ROOT / rel).is_file() else None) != then.get(rel) for rel in paths)


def codebase_size():
    """(files, lines) of the codebase."""
    files = [rel for rel, _ in codebase_files()]
    return len(files), sum((ROOT / rel).read_bytes().count(b"\n") for rel in files)


def load_index():
    """The index of backups/; an unreadable one is set aside (snapshot folders stay) and a new one begun."""
    try:
        return json.loads(INDEX.read_text())
    except FileNotFoundError:
        return {"iteration": 0, "snapshots": []}
    except ValueError:
        aside = INDEX.with_name(f"index.unreadable-{datetime.now():%Y%m%d-%H%M%S}.json")
        os.replace(INDEX, aside)
        tell(f"backups/index.json was unreadable; it is kept as {aside.name} and a new index begins")
        return {"iteration": 0, "snapshots": []}


def save_index(index):
    """Write index.json a snapshot a line, each by json's C encoder (indent= takes its pure-Python one, which came to
    most of the keeper's own time in an iteration once the snapshots added up)."""
    rest = json.dumps({key: value for key, value in index.items() if key != "snapshots"})[1:-1]
    snapshots = ",\n".join(json.dumps(entry) for entry in index.get("snapshots", []))
    write_atomically(INDEX, f'{{{rest}{", " if rest else ""}"snapshots": [\n{snapshots}\n]}}\n')


def object_path(sha):
    return OBJECTS / sha[:2] / sha[2:]


def read_listing(path):
    """The folder listing at path, {name: sha256} (not to be changed: objects never change, so the newest read are
    kept, up to LISTINGS_BYTES of their text, whatever the number of folders, snapshots or stores read)."""
    if path in listings_read:
        listings_read.move_to_end(path)
        return listings_read[path][0]
    data = path.read_bytes()
    listings_read[path] = json.loads(data), len(data)
    listings_read.size += len(data)
    while listings_read.size > LISTINGS_BYTES and len(listings_read) > 1:
        listings_read.size -= listings_read.popitem(last=False)[1][1]
    return listings_read[path][0]


class Listings(OrderedDict):
    """The path of a listing -> (listing, bytes of its text), oldest read first; `size`: the bytes held."""
    size = 0


listings_read = Listings()
LISTINGS_BYTES = 4 << 20  # of listing text kept in memory (the dicts made from it take a few times that)


def has_object(sha):
    return sha in stored or object_path(sha).exists()


def store_object(data):
    """Keep these bytes as an object (once); their sha256."""
    sha = hashlib.sha256(data).hexdigest()
    if sha not in stored and not object_path(sha).exists():
        write_atomically(object_path(sha), data)
        os.chmod(object_path(sha), 0o444)  # shared by every snapshot that has this content: not to be edited
    remember_stored(sha)
    return sha


def remember_stored(sha):
    if len(stored) >= STORED_KNOWN:  # a cache of what exists on disk: forgetting costs a stat, never a write
        stored.clear()
    stored.add(sha)


stored = set()  # the sha256 of objects known to be in backups/objects/
STORED_KNOWN = 200_000  # at most (about 20 MB): more than the objects of a large codebase's kept snapshots


def listings(files):
    """(the snapshot's listing of folders, {sha256: a folder's listing}) of {path: sha256}, as bytes."""
    folders = {}
    for rel, sha in files.items():
        cut = rel.rfind("/") + 1
        folders.setdefault(rel[:cut], {})[rel[cut:]] = sha
    made = {folder: json.dumps(names, sort_keys=True).encode() for folder, names in folders.items()}
    shas = {folder: hashlib.sha256(data).hexdigest() for folder, data in made.items()}
    return json.dumps(shas, sort_keys=True, indent=0).encode(), {shas[f]: data for f, data in made.items()}


def folders_of(entry):
    """{folder: sha256 of its listing} of a snapshot."""
    path = BACKUPS / f"{entry['id']}.json"
    if not path.exists():  # taken by an older fallback.py, as one list of every file: list it as now
        listing, folders = listings(json.loads(gzip.decompress(path.with_suffix(".json.gz").read_bytes())))
        for data in folders.values():
            store_object(data)
        write_atomically(path, listing)
        path.with_suffix(".json.gz").unlink()
    return json.loads(path.read_bytes())


def files_of(entry):
    """{path: sha256} of a snapshot (not to be changed: the newest one taken or read stays in memory)."""
    if entry["id"] not in newest:
        newest.clear()
        newest[entry["id"]] = {folder + name: sha for folder, listing in folders_of(entry).items()
                               for name, sha in read_listing(object_path(listing)).items()}
    return newest[entry["id"]]


newest = {}  # snapshot id -> its files, for the snapshot taken or read last (an iteration's start)


class Reader:
    """A workspace's snapshots as a view reads them (the page, the export, a comparison, a fork): any workspace's,
    read only, and what is gone or unreadable reads as nothing. The keeper's own reading and writing is the
    functions above; both read a listing through one cache (read_listing)."""

    def __init__(self, root):
        self.backups = Path(root) / "backups"

    def snapshots(self):
        """The snapshots backups/index.json lists, oldest first (an unreadable index lists none)."""
        try:
            listed = json.loads((self.backups / "index.json").read_text()).get("snapshots", [])
        except (OSError, ValueError, AttributeError):
            return []
        return [e for e in listed if isinstance(e, dict) and isinstance(e.get("id"), str)
                and isinstance(e.get("iteration"), int) and "kind" in e and "time" in e
                and (self.backups / f"{e['id']}.json").exists()]

    def object_path(self, sha):
        return self.backups / "objects" / sha[:2] / sha[2:]

    def folders_of(self, entry):
        """{folder: sha256 of its listing} of a snapshot; {} if it is gone."""
        try:
            return json.loads((self.backups / f"{entry['id']}.json").read_bytes())
        except (OSError, ValueError):
            return {}

    def listing(self, sha):
        """A folder's listing, {name: sha256}, through the keeper's cache (read_listing); {} if it is gone."""
        try:
            return read_listing(self.object_path(sha))
        except (OSError, ValueError):
            return {}

    def files_of(self, entry):
        """{path: sha256} of a snapshot; {} if it is gone."""
        return {folder + name: sha for folder, listing in self.folders_of(entry).items()
                for name, sha in self.listing(listing).items()}

    def codebase_of(self, entry):
        """{path: sha256} of a snapshot whose store may have been written by anyone (a replay's, a fork's): Untrusted
        when it lists a path that is no codebase's, or an object by anything but its sha256; {} if it is gone."""
        folders = self.folders_of(entry)
        listed = {folder: self.listing(sha) if is_sha(sha) else None for folder, sha in folders.items()} \
            if isinstance(folders, dict) else {"": None}
        if not all(isinstance(names, dict) for names in listed.values()):
            raise Untrusted(f"snapshot {entry['id']} of {self.backups} is no listing of files")
        files = {str(folder) + str(name): sha for folder, names in listed.items() for name, sha in names.items()}
        wrong = next((rel for rel, sha in files.items() if not (is_codebase(rel) and is_sha(sha))), None)
        if wrong is not None:
            raise Untrusted(f"snapshot {entry['id']} of {self.backups} lists {wrong!r}, which is no file of a codebase")
        return files


def snapshot(index, kind, iteration, root=ROOT, files=None):
    """The index entry of a snapshot of the codebase in root as it is now (or of `files`, {path: sha256} whose
    objects are stored, when the caller knows them); made only if no snapshot has it."""
    files = manifest(root) if files is None else dict(files)
    for rel, sha in files.items():
        if sha not in stored and not object_path(sha).exists():
            files[rel] = store_object((root / rel).read_bytes())  # what is stored is listed, even if it changed
        remember_stored(files[rel])
    listing, folders = listings(files)
    digest = hashlib.sha256(listing).hexdigest()
    newest.clear()
    for entry in reversed(index["snapshots"]):
        if entry["digest"] == digest:
            newest[entry["id"]] = files
            return entry
    for data in folders.values():
        store_object(data)
    taken = [int(e["id"]) for e in index["snapshots"]] + [int(p.name[:4]) for p in BACKUPS.glob("[0-9][0-9][0-9][0-9]*")]
    sid = f"{max(taken, default=0) + 1:04d}"
    write_atomically(BACKUPS / f"{sid}.json", listing)
    newest[sid] = files
    entry = {"id": sid, "time": stamp(utc_now()), "iteration": iteration, "kind": kind, "good": False,
             "digest": digest, "count": len(files)}
    index["snapshots"].append(entry)
    save_index(index)
    return entry


def restore(entry):
    """Make the codebase what the snapshot holds; resumable (RESTORING marks one under way). Returns the paths it
    could not write ([(path, why)]: a name outside the allow-list, a content gone from the store, something of the
    person's in the way), each left as the folder holds it."""
    write_atomically(RESTORING, json.dumps({"id": entry["id"]}))
    wanted, current = files_of(entry), manifest()
    for rel in current:
        if rel not in wanted:
            (ROOT / rel).unlink()
            remove_empty_parents(ROOT / rel)
    failed = []
    for rel, sha in wanted.items():
        if current.get(rel) != sha:
            why = refusal(rel) or (None if stays_inside(rel) else f"{rel}: a symlink in the folder leads out of it")
            try:
                if why is None:
                    write_atomically(ROOT / rel, object_path(sha).read_bytes())
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError) as error:
                why = f"{rel}: {error.strerror}"
            failed += [(rel, why)] if why else []
    RESTORING.unlink()
    return failed


def finish_restore(index):
    """Finish a restore a killed keeper left half done; one whose snapshot is gone or damaged is given up, said in a
    line (the folder then holds what it wrote)."""
    wanted = load_json(RESTORING).get("id")
    entry = next((e for e in index["snapshots"] if e["id"] == wanted), None)
    if entry:
        try:
            failed = restore(entry)
            tell(f"finished the restore of snapshot {wanted} that was under way when the last run stopped"
                 + (f" ({len(failed)} file(s) could not be written: {failed[0][1]})" if failed else ""))
        except (FileNotFoundError, ValueError):
            tell(f"the restore of snapshot {wanted} under way when the last run stopped was given up: the snapshot is "
                 "damaged (part of it is gone from backups/)")
    RESTORING.unlink(missing_ok=True)


def stays_inside(rel):
    """Whether writing the folder's path rel writes in the folder (not through a symlink out of it)."""
    return os.path.realpath(ROOT / rel).startswith(os.path.realpath(ROOT) + os.sep)


def prune(index, now=None):
    """Bound backups/ by the retention policy: genesis, the snapshots a person restored to or kept (pinned), the
    newest KEEP_GOOD known-good ones (all the walk-back could want), the last KEEP_LAST, and every landing of
    the last KEEP_LANDED_DAYS are always kept; of older ones, the newest of each day for KEEP_DAILY_DAYS, then
    the newest of each week, while backups/ stays under BACKUPS_BYTES (the oldest go first). The rest, and the
    objects only they had, are deleted. Done once a tenth more has gathered since the last time, or on a new
    day, so that its cost is spread over the iterations."""
    snapshots, now = index["snapshots"], now or datetime.now(timezone.utc).replace(tzinfo=None)
    last = index.get("pruned", {})
    if len(snapshots) <= max(KEEP_LAST + 1, last.get("kept", 0)) + KEEP_LAST // 10 and \
            last.get("day", f"{now:%Y-%m-%d}") == f"{now:%Y-%m-%d}":
        return
    keep, spare = retained(snapshots, now)
    wanted = objects_of(snapshots, keep | spare)
    while spare and size_of(wanted) > BACKUPS_BYTES:  # over the cap: the oldest of those kept by age go first
        spare -= set(sorted(spare, key=int)[:max(1, len(spare) // 10)])
        wanted = objects_of(snapshots, keep | spare)
    keep |= spare
    index["snapshots"] = [e for e in snapshots if e["id"] in keep]
    index["pruned"] = {"kept": len(index["snapshots"]), "day": f"{now:%Y-%m-%d}"}
    save_index(index)
    for entry in [e for e in snapshots if e["id"] not in keep]:
        shutil.rmtree(BACKUPS / entry["id"], ignore_errors=True)
        (BACKUPS / f"{entry['id']}.json").unlink(missing_ok=True)
    for folder in [f for f in os.scandir(OBJECTS) if f.is_dir(follow_symlinks=False)]:
        for item in os.scandir(folder.path):
            if folder.name + item.name not in wanted:
                os.unlink(item.path)
                stored.discard(folder.name + item.name)


def retained(snapshots, now):
    """(the ids always kept, the ids kept by their age while room allows) under the retention policy."""
    def age(entry):
        return now - datetime.strptime(entry["time"][:19], "%Y-%m-%d %H:%M:%S")
    keep = {snapshots[0]["id"]} | {e["id"] for e in snapshots[-KEEP_LAST:] + [e for e in snapshots if e.get("pinned")]}
    keep |= {e["id"] for e in [e for e in snapshots if e["good"]][-KEEP_GOOD:]}
    keep |= {e["id"] for e in snapshots if e["kind"] == "landed" and age(e) <= timedelta(days=KEEP_LANDED_DAYS)}
    daily = {e["time"][:10]: e for e in snapshots if age(e) <= timedelta(days=KEEP_DAILY_DAYS)}
    weekly = {datetime.strptime(e["time"][:10], "%Y-%m-%d").isocalendar()[:2]: e for e in snapshots}
    return keep, {e["id"] for e in [*daily.values(), *weekly.values()]} - keep


def objects_of(snapshots, ids):
    """The objects (contents and listings) the snapshots `ids` hold."""
    listed = set().union(*(folders_of(e).values() for e in snapshots if e["id"] in ids))
    return listed | {sha for listing in listed for sha in read_listing(object_path(listing)).values()}


def size_of(objects):
    return sum(object_path(sha).stat().st_size for sha in objects if object_path(sha).exists())


def retention(index):
    """What the retention policy keeps, in words, for --status."""
    pinned = sum(1 for e in index["snapshots"] if e.get("pinned"))
    return (f"kept: the last {KEEP_LAST}, every landing of the last {KEEP_LANDED_DAYS} day(s), one a day for "
            f"{KEEP_DAILY_DAYS} days, one a week before, within {BACKUPS_BYTES >> 20:,} MB; {pinned} kept by hand "
            "(restored to, or --keep ID)")


def folders_above(paths):
    """Every folder that holds one of these relative paths ("a/b/c.py": "a" and "a/b")."""
    return {rel[:cut] for rel in paths for cut, char in enumerate(rel) if char == "/"}


def remove_empty_parents(path, root=ROOT):
    for parent in path.parents:
        if parent == root:
            return
        try:
            parent.rmdir()
        except OSError:
            return


def walk_back(index, bad):
    """The newest known-good snapshot not seen failing this session; genesis when none is left."""
    good = [e for e in index["snapshots"] if e["good"] and e["id"] not in bad]
    return good[-1] if good else index["snapshots"][0]


def list_backups(index):
    """Every snapshot, oldest first: when, by which iteration, of what kind, and whether a run from it worked."""
    now = current(index)
    print("id    taken (UTC)              iteration  kind         files  a run from it worked")
    for e in index["snapshots"]:
        print(f"{e['id']}  {e['time']:<23}  {e['iteration']:>9}  {e['kind']:<11}  {e['count']:>5}  "
              f"{run_worked(e):<7}{'  <- the codebase now' if e is now else ''}".rstrip())
    if not index["snapshots"]:
        print("no snapshots yet: the first iteration takes one (genesis)")
    return 0


def current(index):
    """The snapshot that holds the codebase as it is now, or None (it was edited since, or never snapshotted)."""
    now = hashlib.sha256(listings(manifest())[0]).hexdigest()
    return next((e for e in reversed(index["snapshots"]) if e["digest"] == now), None)


def run_worked(entry):
    """Whether a seed run started from a snapshot's state finished having asked the model (the walk-back goes
    back to such states only): yes, not yet, or - for a state kept only to be looked at."""
    if entry["kind"] in ("failed", "interrupted"):
        return "-"
    return "yes" if entry["good"] else "not yet"


def materialise(entry):
    """Write a snapshot's files to backups/NNNN/, to look at (copies: editing them changes no backup)."""
    folder = BACKUPS / entry["id"]
    for rel, sha in files_of(entry).items():
        if not (folder / rel).exists():
            write_atomically(folder / rel, object_path(sha).read_bytes())
    print(f"snapshot {entry['id']} ({entry['time']}, {entry['count']} files) is in {folder}")
    return 0


def find_snapshot(index, wanted):
    return next((e for e in index["snapshots"] if e["id"] == wanted.zfill(4)), None)


# --- a fork's store, made from another's ---------------------------------------------------------------
def fork_store(source, entry, backups, iteration):
    """Make `backups` a new store whose one snapshot, genesis, holds what snapshot `entry` of the Reader `source`
    holds, the state before iteration `iteration`: its objects are hard links to source's (objects are never written
    in place, so sharing one is safe), or copies where a link cannot be made. {"entry", "linked", "copied": bytes}."""
    files, shared = source.codebase_of(entry), {"linked": 0, "copied": 0}
    listing, folders = listings(files)
    for sha in set(files.values()) | set(folders):
        here = backups / "objects" / sha[:2] / sha[2:]
        here.parent.mkdir(parents=True, exist_ok=True)
        share_object(source.object_path(sha), here, shared)
    write_atomically(backups / "0001.json", listing)
    kept = {key: entry[key] for key in ("good", "passing", "score", "judged") if key in entry}
    genesis = {"id": "0001", "time": stamp(utc_now()), "iteration": iteration, "kind": "genesis", "good": False,
               **kept, "digest": hashlib.sha256(listing).hexdigest(), "count": len(files), "forked": entry["id"]}
    write_atomically(backups / "index.json", json.dumps({"iteration": iteration - 1, "snapshots": [genesis]}, indent=1))
    return {"entry": genesis, **shared}


def share_object(there, here, shared):
    """Link an object into another store, or copy it (read only, as objects are) where no link can be made."""
    try:
        os.link(there, here)
        shared["linked"] += here.stat().st_size
    except OSError:  # another file system, or one without hard links
        shutil.copyfile(there, here)
        os.chmod(here, 0o444)
        shared["copied"] += here.stat().st_size


def is_sha(text):
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def is_codebase(rel):
    """Whether a relative path names a file of a codebase: within the allow-list of names (names.refusal), no part
    empty, no folder the keeper's or a cache, not the keeper's or the person's file."""
    parts = rel.split("/") if isinstance(rel, str) else [""]
    return all(parts) and not refusal(rel) and \
        not any(part.casefold() in NOT_CODE for part in parts[:-1]) and \
        rel.casefold() not in {p.casefold() for p in GUARDED + STEERING}
