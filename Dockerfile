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
# `docker build .` builds everything. To package a binary built elsewhere (CI does, see
# .ci/image-test), replace the `binary` stage with a directory holding `nvlabel` and the
# `gpu-feature-discovery` symlink to it:
#   buildah build --target runtime --build-context binary=DIR .
# (docker buildx build --build-context binary=DIR works the same way.)

FROM docker.io/library/rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p nvlabel \
 && mkdir -p /out \
 && cp target/release/nvlabel /out/nvlabel \
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
