"""`python -m ascendctl` runs the CLI."""

from ascendctl.cli import main

main()
