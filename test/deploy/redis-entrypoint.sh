#!/bin/sh
# As the official redis image's entrypoint: `redis-server …` runs as redis with protected mode off (its clients
# are other containers on the compose network, not loopback).
set -eu
if [ "${1:-}" = redis-server ]; then
  shift
  set -- redis-server --protected-mode no "$@"
fi
exec setpriv --reuid=redis --regid=redis --init-groups "$@"
