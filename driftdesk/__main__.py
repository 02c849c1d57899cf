from driftdesk.cli import main

raise SystemExit(main())
