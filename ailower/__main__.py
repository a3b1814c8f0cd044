"""``python -m ailower`` runs the command line."""

from ailower.cli import main

main()
