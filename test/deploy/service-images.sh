#!/usr/bin/env bash
# Makes local stand-ins for the official postgres, redis and nginx images compose.yaml names
# (localhost/keyrelay-ci/{postgres,redis,nginx}:bookworm-<hash of their recipe>, from services.Containerfile), on the Debian base that
# base-image.sh makes, for machines that reach Debian's packages but no image registry. Each image is built
# once and kept in podman's image store (the Debian rootfs is cached under $CI_NODES_DIR, default
# /opt/keyrelay-ci). Prints one NAME=image line per service.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The Debian base (and the Node base beside it), made and cached by base-image.sh.
bash "$here/base-image.sh" 22 >/dev/null
podman=(podman --runtime runc --cgroup-manager=cgroupfs)
# Tagged by what they are made from, so an edit to the recipe makes new images.
tag="bookworm-$(cat "$here/services.Containerfile" "$here"/*-entrypoint.sh | sha256sum | cut -c1-12)"
for service in postgres redis nginx; do
  image="localhost/keyrelay-ci/$service:$tag"
  if ! "${podman[@]}" image exists "$image"; then
    "${podman[@]}" build --network=host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
      --target "$service" -f "$here/services.Containerfile" -t "$image" "$here" >&2
  fi
  echo "${service^^}_IMAGE=$image"
done
