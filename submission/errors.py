"""The error of bad input, shared by every module that reads settings, descriptors or
profiles: its message says what is wrong and what to do (the command line prints it and
exits 2)."""


class ConfigError(ValueError):
    """Bad user input: the message says what is wrong and what to do."""
