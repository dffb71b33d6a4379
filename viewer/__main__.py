from agentic_repro.viewer.cli import main

raise SystemExit(main())
