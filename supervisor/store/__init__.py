"""store: what the keeper keeps of a run: snapshots (backups/, the known-good states and every file once), record
(backups/record.sqlite: every iteration, request and exchange; each request booked there as it leaves), journal
(iteration_log.md and pending_tasks.md) and ledger (the gateway's quota.json, and the free tier's days). None of
them imports a view, the policy or the gateway.
"""
