"""Lines that are safe to write: one log format for every command, secrets never printed.

    logs.py        the log configuration every command shares (`--log-format text|json`,
                   `--log-level`), and `for_terminals`: what a terminal is given of a name
    redaction.py   credentials in URLs hidden (`redact_url`, `redact_text`), and the filter
                   installed on every log handler

Neither the ambassador nor the manager owns these: both import them from here, and this
package imports neither (an import contract holds it). It uses the standard library only.
"""
