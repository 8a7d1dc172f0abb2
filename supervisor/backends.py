"""backends: the one place that knows which backend serves: it chooses it from the settings and lists its models.

    gateway = open_gateway(os.environ, state=BACKUPS, ...)   # a started gateway.Gateway on the chosen backend
    list_models(os.environ)                                  # python fallback.py --models; the exit status
    chosen_models(os.environ)                                # the models the settings name (--status)

A backend is a module with chosen_by(environ), from_env(environ) (a ValueError names the setting to fix),
chosen_models(environ) and show_models(environ), whose backend object has the attributes and methods
gateway.Gateway uses (models, key, key_name, local, model_help, prepare, room, hindrance, make_room, ask).
Adding one is a new module and a line in BACKENDS. The first whose settings are present serves; Gemini is
last, the default.
"""
import sys

from . import gemini, openai_compatible
from .scrub import redact
from .gateway import Gateway
from .settings import EX_CONFIG, EX_UNAVAILABLE

BACKENDS = (openai_compatible, gemini)


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
