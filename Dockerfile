# The manager image: build the `manager` binary, then run it as a non-root user
# on a distroless base (no shell, no package manager).
#
#   docker build -t socialweb-manager:dev .
#
# The chart runs it with a read-only root filesystem as uid/gid 65532.

FROM rust:1.95-bookworm AS builder
WORKDIR /src
# Dependencies first, so a source change does not rebuild them all.
COPY Cargo.toml Cargo.lock ./
COPY api api
COPY crates crates
COPY xtask xtask
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p manager --bin manager \
    && install -D target/release/manager /out/manager

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/manager /usr/local/bin/manager
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/manager"]
CMD ["run"]
