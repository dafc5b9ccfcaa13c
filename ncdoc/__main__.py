from ncdoc.cli.main import main

raise SystemExit(main())
