"""`workqueue completion bash|zsh`: shell completion generated from the parser itself.

    source <(workqueue completion bash)          # in ~/.bashrc
    source <(workqueue completion zsh)           # in ~/.zshrc (through zsh's bashcompinit)

Commands complete first; then the flags of the command typed, the values of flags that have
choices (`--backend local|kubernetes`, `--log-format text|json`), and file names otherwise.
Built from the same parser that parses the command line, so a new flag completes the day it is
added. The zsh script is the bash one under zsh's own `bashcompinit` emulation.
"""

from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh")


def add_parser(subparsers, root: argparse.ArgumentParser) -> None:
    """`root` is the whole command line's parser, the one the script is made from."""
    p = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script: source <(workqueue completion bash)",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=lambda args: print(script(root, args.shell)) or 0)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, list[str]]]:
    flags: list[str] = []
    choices: dict[str, list[str]] = {}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        for option in action.option_strings:
            flags.append(option)
            if action.choices:
                choices[option] = [str(c) for c in action.choices]
    return flags, choices


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    commands = _commands(parser)
    top = " ".join([*commands, "--help", "--version"])
    values, flag_cases = [], []
    for name, sub in commands.items():
        flags, choices = _flags(sub)
        flag_cases.append(f"        {name}) opts={shlex.quote(' '.join(flags))} ;;")
        for flag, words in choices.items():
            values.append(f"        '{name} {flag}') words={shlex.quote(' '.join(words))} ;;")
        first = next((a for a in sub._actions if not a.option_strings and a.choices), None)
        if first is not None:  # a positional with choices, right after the command
            words = " ".join(map(str, first.choices))
            values.append(f"        '{name} {name}') words={shlex.quote(words)} ;;")
    bash = f"""# workqueue completion ({shell}): source <(workqueue completion {shell})
_workqueue() {{
    local cur prev cmd opts words
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    cmd="${{COMP_WORDS[1]}}"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=( $(compgen -W {shlex.quote(top)} -- "$cur") )
        return 0
    fi
    words=""
    case "$cmd $prev" in
{chr(10).join(values)}
    esac
    if [ -n "$words" ]; then
        COMPREPLY=( $(compgen -W "$words" -- "$cur") )
        return 0
    fi
    opts=""
    case "$cmd" in
{chr(10).join(flag_cases)}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
    else
        COMPREPLY=( $(compgen -f -- "$cur") )
    fi
    return 0
}}
complete -o filenames -F _workqueue workqueue"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash
