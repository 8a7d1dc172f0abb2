"""recovery: an iteration's row written with its log section, and whatever a killed keeper left, finished.

    write_iteration(row, result)   # the row and its requests in one transaction, then its section of the log
    recover(index)                 # at each start, and after an iteration that could not write all it meant to

A keeper killed with kill -9 (or stopped by a full disk) may leave: a child still running, a restore under way, a
landing half copied, a landing whose row was not written, an iteration cut short (its changes are kept, the
codebase put back), rows in the record that the log does not show yet. recover() finishes or undoes each. Every
row written holds, besides its own requests, those the gateway booked as they left that no row holds (an
iteration cut short before its row): every request is in the record from the moment it leaves.
"""
from .store import journal, record as book, snapshots as snap
from .confined import terrarium
from .events import tell
from .kinds import Outcome, Result
from .settings import LOG, ROOT, SETTLING, UNDER_WAY, load_json


def write_iteration(row, result):
    """Write the iteration into the record with its requests (one transaction: a landing and its row go together),
    and those cut short that no row holds (the row counts them: `row` is updated), then its section of
    iteration_log.md, rendered from the row."""
    book.writer().write(row, result.said.calls, result.waste)
    SETTLING.unlink(missing_ok=True)
    journal.log_iteration(row)


def recover(index):
    """Finish or undo what a killed keeper (or a full disk) left: a child still running, a restore or a landing under
    way, an iteration cut short (its changes are kept, the codebase put back). Whatever it meets (a name too long,
    a folder where a file was, an object gone from the store, a marker no keeper wrote) is said in a line and the
    marker cleared: the next start never dies on it (snapshots.finish_restore, terrarium.finish_landing)."""
    terrarium.end_orphans()
    snap.finish_restore(index)
    entries = {e["id"]: e for e in index["snapshots"]}
    settling = load_json(SETTLING)
    terrarium.finish_landing(entries.get(settling.get("start")))
    settle_landing(index, settling, entries)
    under_way = load_json(UNDER_WAY)
    number = under_way.get("iteration") if isinstance(under_way.get("iteration"), int) else 0
    if under_way.get("start") in entries and not book.has_row(ROOT, number):  # a landing settled above has its row
        terrarium.set_aside(index, entries[under_way["start"]], number)
        killed = Result(Outcome.STOPPED, "the keeper was killed during this iteration", start=under_way["start"])
        write_iteration(book.row_of(number, killed, 0.0), killed)
    UNDER_WAY.unlink(missing_ok=True)
    catch_up_log()


def settle_landing(index, settling, entries):
    """A landing whose row a killed keeper did not write: the folder has it (finished or undone), so its snapshot is
    taken and its row written; or it never began, and the row says the iteration was stopped."""
    start, number = entries.get(settling.get("start")), settling.get("iteration")
    if start and isinstance(number, int) and not book.has_row(ROOT, number):
        after = snap.snapshot(index, "landed", number)
        try:
            changes = snap.changes_since(start) if after["id"] != start["id"] else []
        except (FileNotFoundError, ValueError):  # the start's snapshot is damaged: what the landing changed is unknown
            changes = []
            tell(f"snapshot {start['id']} is damaged: iteration {number}'s landing is kept as snapshot {after['id']}")
        if changes:
            result = Result(Outcome.LANDED, f"{len(changes)} file(s) changed", "the keeper was killed as it landed; "
                            "the landing was finished at the next start", start=start["id"], after=after["id"],
                            changes=changes, landed=len(changes))
        else:
            result = Result(Outcome.STOPPED, "the keeper was killed during this iteration", start=start["id"])
        write_iteration(book.row_of(number, result, 0.0), result)
    SETTLING.unlink(missing_ok=True)


def catch_up_log():
    """Write the sections of rows a killed keeper wrote into the record but not yet into the log."""
    for row in book.iterations(ROOT, journal.last_logged_iteration()) if LOG.exists() else []:
        journal.log_iteration(row)
