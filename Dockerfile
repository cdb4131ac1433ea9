# gaffer as a container: `gaffer serve` (default) or `gaffer worker`.
# Build:  docker build -t gaffer .
# Run:    docker run -v gaffer-data:/data -v ./config:/config:ro -p 7777:7777 gaffer
# See docs/operations.md ("Container") for the config, the agents and the
# check's toolchains, and deploy/compose.yaml for PostgreSQL and several workers.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The commit goes into `gaffer --version`; .git is not copied into the build.
ARG GAFFER_COMMIT="container build"
ENV GAFFER_COMMIT=${GAFFER_COMMIT}
RUN cargo build --release --locked -p gaffer --bin gaffer \
    && install -m 0755 target/release/gaffer /usr/local/bin/gaffer

FROM debian:bookworm-slim
# git for worktrees and branches, ssh for pushing, curl for the health check.
# Debian stable's versions (security updates included), not pinned ones.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl git openssh-client tini \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 gaffer \
    && useradd --uid 10001 --gid gaffer --create-home --home-dir /home/gaffer gaffer \
    && mkdir -p /data /config \
    && chown gaffer:gaffer /data
COPY --from=build /usr/local/bin/gaffer /usr/local/bin/gaffer
USER 10001:10001
# The journal (SQLite), worktrees and the local secret live in /data; the config
# and policy (API tokens: anything but loopback needs one) are mounted at /config.
ENV GAFFER_DATA_DIR=/data \
    GAFFER_CONFIG=/config/config.toml \
    GAFFER_SERVER_LISTEN=0.0.0.0:7777 \
    NO_COLOR=1
VOLUME ["/data"]
EXPOSE 7777
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["curl", "--fail", "--silent", "--show-error", "--max-time", "4", "http://127.0.0.1:7777/healthz"]
# tini reaps the agents' and checks' processes and passes SIGTERM on: gaffer
# stops its agents and releases its leases. Exit 78 means fix the config.
ENTRYPOINT ["/usr/bin/tini", "--", "gaffer"]
CMD ["serve"]
