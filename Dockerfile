# leasewrap as a container image: a static binary on distroless, run as the
# unprivileged "nonroot" user (uid 65532, numeric so that Kubernetes'
# runAsNonRoot can check it), with CA certificates in /etc/ssl/certs for
# sslmode=verify-full.
#
#   docker build --build-arg VERSION=1.2.3 -t leasewrap .   # BuildKit (Docker 23+)
#   docker run --rm leasewrap version
#
# To put the lease in front of your own command, copy leasewrap into your
# image:
#
#   FROM leasewrap AS lw
#   FROM your-app
#   COPY --from=lw /usr/local/bin/leasewrap /usr/local/bin/leasewrap
#   ENTRYPOINT ["leasewrap", "--wait", "--job", "scheduler", "--"]
#   CMD ["/app/run-scheduler"]
#
# The last stage is the default: it builds from source. The "release" stage is
# for GoReleaser (.goreleaser.yaml, dockers_v2 with --target=release), which
# puts its own prebuilt binaries in the build context as linux/<arch>/leasewrap.

# Compile on the builder's platform, cross-compile for the target's.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
# urfave_cli_no_docs: no man page or markdown code in the binary (as in
# .goreleaser.yaml), which shortens start-up.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -tags urfave_cli_no_docs \
    -ldflags "-s -w -X github.com/redbite/leasewrap/command/version.buildVersion=${VERSION}" \
    -o /out/leasewrap .

# distroless/static: no shell, no package manager; ca-certificates, tzdata and
# a nonroot user are included.
FROM gcr.io/distroless/static-debian12:nonroot AS base
LABEL org.opencontainers.image.title=leasewrap \
      org.opencontainers.image.source=https://github.com/redbite/leasewrap \
      org.opencontainers.image.licenses=Apache-2.0
USER 65532:65532
ENTRYPOINT ["leasewrap"]

# GoReleaser's image: copies the binary it already built.
FROM base AS release
ARG TARGETPLATFORM
COPY $TARGETPLATFORM/leasewrap /usr/local/bin/leasewrap

# Default: the binary built above.
FROM base
COPY --from=build /out/leasewrap /usr/local/bin/leasewrap
