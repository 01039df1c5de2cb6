#!/bin/sh
# The image's entry point: `serve` and `local` run the arcs CLI (the standalone server, the local
# emulation); a streaming handler on Lambda runs under arcs.http.runtime_api, the runtime that streams
# (the base image's runtime answers buffered only); anything else is a Lambda handler for the base
# image's own entry point (the Lambda runtime on AWS, its interface emulator elsewhere).
set -e
case "${1:-}" in
  serve|local) exec python3 -m arcs.cli "$@" ;;
  arcs) shift; exec python3 -m arcs.cli "$@" ;;  # "arcs serve ...", as the ClickBench scripts run it
  *.stream_handler)
    if [ -n "${AWS_LAMBDA_RUNTIME_API:-}" ]; then
      _HANDLER="$1" exec python3 -m arcs.http.runtime_api
    fi
    exec "${ARCS_LAMBDA_ENTRYPOINT:-/lambda-entrypoint.sh}" "$@" ;;
  *) exec "${ARCS_LAMBDA_ENTRYPOINT:-/lambda-entrypoint.sh}" "$@" ;;
esac
