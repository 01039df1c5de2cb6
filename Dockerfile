# Arc Serverless as one container image (docs/deploy.md, "Container image"):
# - AWS Lambda: the query function as an image (10 GB limit instead of layers' 250 MB); CMD is its handler.
# - EC2 (ClickBench): `docker run -p 8000:8000 -v /data:/data IMAGE serve --host 0.0.0.0 --data-dir /data`.
# Build for Graviton with `docker build --platform linux/arm64 -t arc-serverless .` (linux/amd64 also works).
ARG UV_VERSION=0.13.9

# arcs.native's C library, compiled for the image's own architecture (a --platform build runs this
# stage on that platform) by the Zig compiler pinned in uv.lock. The build machine's copy never enters
# the context (.dockerignore): it may be of another architecture, or missing on a clean checkout.
FROM public.ecr.aws/lambda/python:3.12 AS native
ARG UV_VERSION
ENV ZIG_GLOBAL_CACHE_DIR=/tmp/zig-cache
COPY pyproject.toml uv.lock /build/
COPY layers/__init__.py layers/native.py /build/layers/
COPY src/arcs/native/ /build/src/arcs/native/
RUN pip install --no-cache-dir "uv==${UV_VERSION}" \
 && uv export --project /build --frozen --only-dev --no-emit-project --no-hashes --output-file /build/dev.txt \
 && uv pip install --system --no-cache --constraint /build/dev.txt ziglang \
 && cd /build && python3 -m layers.native

FROM public.ecr.aws/lambda/python:3.12

# The dependencies are exactly uv.lock's: the runtime ones plus the server extra (uvicorn; moto for `arcs local`).
ARG UV_VERSION
COPY pyproject.toml uv.lock /tmp/lock/
RUN pip install --no-cache-dir "uv==${UV_VERSION}" \
 && uv export --project /tmp/lock --frozen --no-dev --no-emit-project --no-hashes --extra server \
      --output-file /tmp/lock/requirements.txt \
 && uv pip install --system --no-cache --requirement /tmp/lock/requirements.txt \
 && pip uninstall --yes uv \
 && rm -rf /tmp/lock

# The same code as the functions' layers: the core, the handlers, the ClickBench data generator.
COPY src/arcs/ ${LAMBDA_TASK_ROOT}/arcs/
COPY --from=native /build/src/arcs/native/_arcs_native.so ${LAMBDA_TASK_ROOT}/arcs/native/_arcs_native.so
COPY functions/ ${LAMBDA_TASK_ROOT}/functions/
COPY clickbench/ ${LAMBDA_TASK_ROOT}/clickbench/
COPY container/entrypoint.sh /usr/local/bin/arcs-entrypoint
# Lambda's file system is read-only: compile now, not on every cold start.
RUN python3 -m compileall -q ${LAMBDA_TASK_ROOT} && chmod 0755 /usr/local/bin/arcs-entrypoint

ENV PYTHONPATH=${LAMBDA_TASK_ROOT}
# Arrow on the C heap (src/arcs/allocator.py), as the stack and the CLI set it: here for a handler
# started without either (the Lambda runtime interface emulator).
ENV ARROW_DEFAULT_MEMORY_POOL=system
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/arcs-entrypoint"]
CMD ["functions.query.handler.stream_handler"]
