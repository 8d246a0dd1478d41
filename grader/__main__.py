import sys

from grader.run.cli import main

sys.exit(main())
