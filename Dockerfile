# The shardwise command in a minimal image: a static binary (no cgo; the
# SQLite driver is pure Go) on distroless/static, which has CA
# certificates and time zones and nothing else, run as a non-root user.
#
#   docker build -t shardwise .        (or: podman build, buildah bud)
#   docker run --rm shardwise --help
#
# deploy/kubernetes runs it as zone and economy nodes (docs/operators.md,
# "Running on Kubernetes").
FROM docker.io/library/golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN ./scripts/build-static /out/shardwise

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shardwise /usr/local/bin/shardwise
# nonroot (65532) of the base image, by number so that a runtime can check
# it is not root without reading /etc/passwd.
USER 65532:65532
# The ports deploy/kubernetes uses: the zone link, the economy service, the
# gateway, /metrics /healthz /readyz.
EXPOSE 7100 7200 8080 9100
ENTRYPOINT ["/usr/local/bin/shardwise"]
