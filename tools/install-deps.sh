#!/bin/sh
# Installs the Debian packages spotdeck needs (packages/debian.txt), with sudo
# when not root.  With --bench, also the benchmark peers (PyTorch).
set -e
cd "$(dirname "$0")/.."
lists=packages/debian.txt
[ "${1:-}" = --bench ] && lists="$lists packages/debian-bench.txt"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
pkgs=$(cat $lists | grep -v '^#' | grep -v '^$')
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $pkgs
