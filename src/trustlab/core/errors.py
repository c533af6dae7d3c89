"""The one exception tree of trustlab.

Every error a user can cause carries a one-line, actionable message; the CLI prints it
and exits with status 2. Domain errors also subclass the builtin they resemble, so
``except ValueError`` keeps working for callers who do not know trustlab::

    TrustlabError(Exception)
    ├── ConfigError(TrustlabError, ValueError)          bad experiment config or --set override
    ├── InputError(TrustlabError, ValueError)           bad argument to a library function
    ├── DataError(TrustlabError, ValueError)            unreadable or malformed data file
    ├── UnknownMethodError(TrustlabError, LookupError)  no method with that id
    ├── NotFittedError(TrustlabError, RuntimeError)     a lifecycle step called out of order
    ├── SolverError(TrustlabError, RuntimeError)        a solver failed or hit its limit
    ├── BackendError(TrustlabError, ConnectionError)    a remote backend failed after retries
    └── MissingDependencyError(TrustlabError, ImportError)  an optional extra is not installed
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "ConfigError",
    "DataError",
    "InputError",
    "MissingDependencyError",
    "NotFittedError",
    "SolverError",
    "TrustlabError",
    "UnknownMethodError",
]


class TrustlabError(Exception):
    """Base class of every error trustlab raises on purpose."""

    def __str__(self) -> str:  # keep messages on one line, whatever the caller passed
        return " ".join(super().__str__().split())


class ConfigError(TrustlabError, ValueError):
    """An experiment config, YAML file or ``--set`` override is invalid."""


class InputError(TrustlabError, ValueError):
    """A library function received an argument of the wrong shape, type or range."""


class DataError(TrustlabError, ValueError):
    """A data file is missing, unreadable or not in the expected format."""


class UnknownMethodError(TrustlabError, LookupError):
    """No method is registered under the requested id."""

    def __str__(self) -> str:  # LookupError would quote the message; we want it plain
        return TrustlabError.__str__(self)


class NotFittedError(TrustlabError, RuntimeError):
    """A step that needs a fitted object was called before the step that fits it."""


class SolverError(TrustlabError, RuntimeError):
    """A numerical or combinatorial solver failed or stopped without an answer."""


class BackendError(TrustlabError, ConnectionError):
    """A remote backend (e.g. an OpenAI-compatible server) failed after the allowed retries."""


class MissingDependencyError(TrustlabError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    @classmethod
    def for_package(cls, package: str, extra: str, feature: str) -> MissingDependencyError:
        return cls(
            f"{feature} needs the package '{package}'. "
            f"Install it with: pip install 'trustlab[{extra}]'"
        )
