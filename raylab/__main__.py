import sys

from raylab.cli import main

sys.exit(main())
