"""`python -m ascendctl` runs the CLI."""

from .cli import main

main()
