"""The package version, in a module of its own: the adapters and the HTTP client name it
without importing the package (and everything it imports) first."""

__version__ = "0.1.0"
