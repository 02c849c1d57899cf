from driftdesk.cli.main import main

# Guarded: a process started by ``spawn`` (trend's second process) imports this module again.
if __name__ == "__main__":
    raise SystemExit(main())
