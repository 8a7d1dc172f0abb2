"""backends: the one place that knows which backend serves: it chooses it from the settings and lists its models.

    gateway = open_gateway(os.environ, state=BACKUPS, ...)   # a started gateway.Gateway on the chosen backend
    list_models(os.environ)                                  # python fallback.py --models; the exit status
    chosen_models(os.environ)                                # the models the settings name (--status)

A backend is a module with chosen_by(environ), from_env(environ) (a ValueError names the setting to fix),
chosen_models(environ) and show_models(environ), whose backend object is a Backend: what gateway.Gateway uses.
Adding one is a new module and a line in BACKENDS. The first whose settings are present serves; Gemini is
last, the default.
"""
import sys
from typing import Protocol, runtime_checkable

from . import gemini, openai_compatible, replay
from ..scrub import redact
from .gateway import Gateway
from ..settings import EX_CONFIG, EX_UNAVAILABLE

BACKENDS = (replay, openai_compatible, gemini)  # replay: a record's answers, offline


@runtime_checkable
class Backend(Protocol):
    """One wire format to the model: the gateway holds one, and no other room asks which it is."""
    models: list      # the models the settings name, best first
    key: str          # the secret it sends upstream (the gateway never shows it)
    key_name: str     # the setting holding the key: errors name it, redaction shows it
    local: bool       # a server of the person's own: no free-tier quotas, its context told by a setting
    model_help: str   # how to name models that can be asked, when none can
    answer_format: str  # what answers.adapt asks the model for: "json" (the seed's schema) or "files" (<file> blocks)

    def prepare(self, models):
        """What the backend must learn before planning (a server's context, say): None, or an outcomes.Plan to stop
        or wait when it cannot serve now."""

    def room(self, model, facts):
        """The largest prompt, in estimated tokens, the model can be given."""

    def hindrance(self, model, facts):
        """One line when the model cannot be of use (too small a prompt), else None."""

    def make_room(self, model, tokens):
        """What a person can do when the steering files leave no room: the setting to raise, or "shorten them"."""

    def ask(self, model, body, facts):
        """The outcome (an outcomes.Reading) of one request of the gateway's body to the model."""


def chosen(environ):
    """The backend module the settings choose."""
    return next(module for module in BACKENDS if module.chosen_by(environ))


def open_gateway(environ, state, **settings):
    """A started gateway to the chosen backend; a ValueError says in one line which setting to fix."""
    gateway = Gateway(chosen(environ).from_env(environ), state, **settings)
    gateway.start()
    return gateway


def chosen_models(environ):
    return chosen(environ).chosen_models(environ)


def list_models(environ):
    """Print the models the chosen backend offers (one request that spends no generation quota); the exit status."""
    try:
        chosen(environ).show_models(environ)
    except ConnectionError as error:
        print(redact(f"fallback: {error}"), file=sys.stderr)
        return EX_UNAVAILABLE
    except ValueError as error:
        print(redact(f"fallback: {error}"), file=sys.stderr)
        return EX_CONFIG
    return 0
