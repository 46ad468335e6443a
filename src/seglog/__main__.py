"""``python -m seglog`` runs the command line."""

from seglog.cli.main import main

main()
