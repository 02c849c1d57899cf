from driftdesk.cli.main import main

raise SystemExit(main())
