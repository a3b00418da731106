# bullsweep in a container: built on Debian with the pinned toolchain, run on distroless as a
# non-root user. `docker build -t bullsweep .`, then see deploy/kubernetes/.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p bullsweep && strip target/release/bullsweep

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/bullsweep /usr/local/bin/bullsweep
USER nonroot:nonroot
WORKDIR /var/lib/bullsweep
EXPOSE 10464
ENTRYPOINT ["/usr/local/bin/bullsweep"]
CMD ["--config", "/etc/bullsweep/policies.yaml", "daemon", "--listen", "0.0.0.0:10464"]
