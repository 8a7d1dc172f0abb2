"""recovery: an iteration's row written with its log section, and whatever a killed keeper left, finished.

    write_iteration(row, result)   # the row and its requests in one transaction, then its section of the log
    recover(index)                 # before anything else at each start and each iteration

A keeper killed with kill -9 (or stopped by a full disk) may leave: a child still running, a restore under way, a
landing half copied, a landing whose row was not written, an iteration cut short (its changes are kept, the
codebase put back), rows in the record that the log does not show yet. recover() finishes or undoes each.
"""
from . import journal, record as book, snapshots as snap, terrarium
from .console import say
from .iteration import Outcome, Result, set_aside
from .settings import LOG, RESTORING, ROOT, SETTLING, UNDER_WAY, load_json


def write_iteration(row, result):
    """Write the iteration into the record with its requests (one transaction: a landing and its row go together),
    then its section of iteration_log.md, rendered from the row."""
    book.writer().write(row, result.said.get("calls") or [], result.waste)
    SETTLING.unlink(missing_ok=True)
    journal.log_iteration(row)


def recover(index):
    """Finish what a killed keeper (or a full disk) left: a child still running, a half-made snapshot, a restore
    under way, an iteration cut short (its changes are kept, the codebase put back)."""
    terrarium.end_orphans()
    entries = {e["id"]: e for e in index["snapshots"]}
    wanted = load_json(RESTORING).get("id")
    if wanted in entries:
        snap.restore(entries[wanted])
        say(f"finished the restore of snapshot {wanted} that was under way when the last run stopped")
    RESTORING.unlink(missing_ok=True)
    terrarium.finish_landing()
    settle_landing(index, load_json(SETTLING), entries)
    cut_short = load_json(UNDER_WAY)
    if cut_short.get("start") in entries:
        set_aside(index, entries[cut_short["start"]], cut_short.get("iteration", 0))
        killed = Result(Outcome.STOPPED, "the keeper was killed during this iteration", start=cut_short["start"])
        write_iteration(book.row_of(cut_short.get("iteration", 0), killed, 0.0), killed)
    UNDER_WAY.unlink(missing_ok=True)
    catch_up_log()


def settle_landing(index, settling, entries):
    """A landing whose row a killed keeper did not write: the folder has it (finish_landing saw to that), so its
    snapshot is taken and its row written; or it never began, and the row says the iteration was stopped."""
    start = entries.get(settling.get("start"))
    if start and not book.has_row(ROOT, settling.get("iteration")):
        after = snap.snapshot(index, "landed", settling["iteration"])
        changes = snap.changes_since(start) if after["id"] != start["id"] else []
        if changes:
            result = Result(Outcome.LANDED, f"{len(changes)} file(s) changed", "the keeper was killed as it landed; "
                            "the landing was finished at the next start", start=start["id"], after=after["id"],
                            changes=changes, landed=len(changes))
        else:
            result = Result(Outcome.STOPPED, "the keeper was killed during this iteration", start=start["id"])
        write_iteration(book.row_of(settling["iteration"], result, 0.0), result)
    SETTLING.unlink(missing_ok=True)


def catch_up_log():
    """Write the sections of rows a killed keeper wrote into the record but not yet into the log."""
    for row in book.iterations(ROOT, journal.last_logged_iteration()) if LOG.exists() else []:
        journal.log_iteration(row)
