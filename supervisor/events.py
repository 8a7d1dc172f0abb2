"""events: what the keeper's rooms tell a person as it happens, and who hears it. The rooms tell; the front door
(fallback.py) says who listens, the console; with no listener (a test, a bench) what is told goes nowhere.

    tell("restored snapshot 3f2a...")            a permanent line (outcome: what colours it, where it is shown)
    phase("checking: the tests", restart=True)   what the iteration is doing now
    listen(console.say, console.show_phase)      the door's choice, once
"""
HEARD = {"tell": [], "phase": []}  # who hears each kind of event, in the order they were given


def listen(tell=None, phase=None):
    """Add a listener to each kind of event given."""
    for kind, hear in (("tell", tell), ("phase", phase)):
        if hear is not None:
            HEARD[kind].append(hear)


def tell(line, outcome=None):
    """A line for the person, kept (on the console: a line of its own, coloured by outcome)."""
    for hear in HEARD["tell"]:
        hear(line, outcome)


def phase(text, restart=False):
    """What is happening now (on a terminal: its status line); `restart`: a new iteration's clock starts."""
    for hear in HEARD["phase"]:
        hear(text, restart)
