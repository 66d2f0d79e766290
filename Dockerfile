# syntax=docker/dockerfile:1
# nvlabel image: a glibc distroless base (NVML is dlopen'ed from the driver the NVIDIA container
# runtime injects, so the binary cannot be fully static), and the binary also reachable as
# gpu-feature-discovery so an existing GFD DaemonSet or GPU Operator ClusterPolicy can switch
# images without other changes.
#
# The default user is root, as in GFD's image: the GPU Operator runs this container privileged
# with no runAsUser, and only UID 0 can write its root-owned features.d hostPath and read the PCI
# config space the vGPU labels need. nvlabel's own manifests (deploy/) always set the user in the
# pod spec: UID 65532 for the API modes, UID 0 with every capability dropped for the feature file.
#
# `docker build .` builds everything for the building machine's arch. Both arches, as one
# manifest list (the builder cross-compiles on the building machine, nothing runs emulated):
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/nvlabel:0.1.0 --push .
# To package a binary built elsewhere (CI does, see .ci/image-test), replace the `binary` stage
# with a directory holding `nvlabel` and the `gpu-feature-discovery` symlink to it:
#   buildah build --target runtime --platform linux/ARCH --build-context binary=DIR .
# (docker buildx build --build-context binary=DIR works the same way.)

FROM --platform=$BUILDPLATFORM docker.io/library/rust:1.95-slim-bookworm AS build
ARG TARGETARCH
# The target's Rust standard library and, for another arch than the builder's, Debian's cross gcc
# (ring and psm compile C; it links). Named per target, so the same lines serve either builder.
ENV CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=x86_64-linux-gnu-gcc \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_x86_64_unknown_linux_gnu=x86_64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
RUN case "$TARGETARCH" in \
      amd64) triple=x86_64-unknown-linux-gnu cross="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
      arm64) triple=aarch64-unknown-linux-gnu cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
      *) echo "nvlabel is built for amd64 and arm64, not '$TARGETARCH'" >&2; exit 1 ;; \
    esac \
 && if [ "${triple%%-*}" != "$(uname -m)" ]; then \
      apt-get update && apt-get install -y --no-install-recommends $cross && rm -rf /var/lib/apt/lists/*; \
    fi \
 && rustup target add "$triple" \
 && echo "$triple" >/rust-target
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p nvlabel --target "$(cat /rust-target)" \
 && mkdir -p /out \
 && cp "target/$(cat /rust-target)/release/nvlabel" /out/nvlabel \
 && ln -s nvlabel /out/gpu-feature-discovery

# Only the two files the runtime stage installs: the stage a prebuilt binary replaces.
FROM scratch AS binary
COPY --from=build /out/ /

FROM gcr.io/distroless/cc-debian12 AS runtime
# Kept equal to Cargo.toml's version (.ci/image-test checks); CI passes it explicitly too.
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="nvlabel" \
      org.opencontainers.image.description="Kubernetes GPU node labeler: NVIDIA GPU Feature Discovery labels, valid and deterministic" \
      org.opencontainers.image.source="https://github.com/nvlabel/nvlabel" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=binary / /usr/bin/
# For the NVIDIA container runtime: every GPU, and NVML only.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility
USER 0:0
ENTRYPOINT ["/usr/bin/nvlabel"]
