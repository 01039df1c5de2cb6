#!/bin/sh
# The image's entry point: `serve` and `local` run the arcs CLI (the standalone server, the local
# emulation); anything else is a Lambda handler for the base image's own entry point (the Lambda
# runtime on AWS, its interface emulator elsewhere).
set -e
case "${1:-}" in
  serve|local) exec python3 -m arcs.cli "$@" ;;
  arcs) shift; exec python3 -m arcs.cli "$@" ;;  # "arcs serve ...", as the ClickBench scripts run it
  *) exec "${ARCS_LAMBDA_ENTRYPOINT:-/lambda-entrypoint.sh}" "$@" ;;
esac
