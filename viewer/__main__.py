from viewer.cli import main

raise SystemExit(main())
