"""views: what a person reads and types: the command line (cli, preflight), the console, report.html (report, from
history), compare.html (compare), what the two pages share (chart), --status (status), --export-git (export) and
the offline demo (demo). They read the store; nothing below them imports them, and the rooms below tell what
happens through events.py.
"""
