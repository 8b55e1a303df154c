"""``python -m runner.worker JOB_DIR``: run one evaluation and write its result."""

import sys

from runner.worker.evaluate import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
