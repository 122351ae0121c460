#!/usr/bin/env bash
# Cold-fetch benchmark (bench_fetch.py) over the model bench/run.sh uploaded to s3test:models/bench.
set -euo pipefail
"$HFS3_BIN" build s3test:models/bench >/dev/null
HFS3_ROOT=$PWD python3 bench/bench_fetch.py "$WORK/model" s3test:models/bench models/bench "${BENCH_ROUNDS:-3}"
