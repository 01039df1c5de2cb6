#!/bin/bash
# ClickBench entry for Arc Serverless, run on a fresh EC2 instance (Ubuntu 24.04) from a checkout of
# this repository: installs Docker, builds the server image, downloads hits.parquet, loads it into the
# storage layout, runs the 43 queries (cold: restart + drop caches; then 2 hot tries) and writes
# results/<date>/<machine>.json in ClickBench's format.
#   MACHINE   the instance type for the JSON (default: from the instance metadata), e.g. c6a.4xlarge,
#             c7a.metal-48xl, c8g.metal-48xl
#   TRIES     tries per query (default 3)
set -euo pipefail
cd "$(dirname "$0")"
export ARCS_ENTRY_DIR="$PWD"
TRIES=${TRIES:-3}

./install
./start
for _ in $(seq 1 120); do ./check && break; sleep 1; done
./check

if [ ! -f hits.parquet ]; then
    wget --continue --progress=dot:giga \
        'https://datasets.clickhouse.com/hits_compatible/athena/hits.parquet'
fi
# The server reads the catalog at start: load with it stopped, then start it again.
./stop
load_started=$(date +%s.%N)
./load
sync
load_time=$(echo "$(date +%s.%N) - $load_started" | bc)
./start
for _ in $(seq 1 120); do ./check && break; sleep 1; done

# The driver loop of ClickBench's lib/benchmark-common.sh for a restartable system.
: > log.txt
while IFS= read -r query; do
    [ -z "$query" ] && continue
    echo "$query" >> log.txt
    printf '[' >> result.csv.tmp
    for i in $(seq 1 "$TRIES"); do
        if [ "$i" -eq 1 ]; then
            ./stop
            while ./check; do sleep 0.2; done
            sync
            echo 3 | sudo tee /proc/sys/vm/drop_caches >/dev/null
            ./start
            for _ in $(seq 1 120); do ./check && break; sleep 0.5; done
        fi
        if ./query <<< "$query" > /dev/null 2> query.err && last=$(tail -n 1 query.err) && \
           [[ "$last" =~ ^[0-9.]+$ ]]; then
            printf '%s' "$last" >> result.csv.tmp
        else
            printf 'null' >> result.csv.tmp
        fi
        [ "$i" -lt "$TRIES" ] && printf ', ' >> result.csv.tmp
    done
    printf '],\n' >> result.csv.tmp
done < ../queries.sql
./stop

data_size=$(./data-size)
machine=${MACHINE:-$(curl -s -m 2 http://169.254.169.254/latest/meta-data/instance-type || echo unknown)}
date=$(date -u +%Y-%m-%d)
mkdir -p "results/$date"
python3 make_json.py result.csv.tmp "$machine" "$date" "$load_time" "$data_size" > "results/$date/$machine.json"
rm -f result.csv.tmp query.err
cat "results/$date/$machine.json"
