#!/usr/bin/env bash
# The layering of proxy/ (README: Architecture, "Modules and layering"), checked on the #include
# lines and the CMake link lines: the configuration stops at the door.
#   1. No runtime module includes config/: only app/ (which translates the parsed config into each
#      module's options), config/ itself, tests/ and bench/ may. Nor does one link idem_config.
#   2. config/ sits above no runtime module: of theirs it includes only the plain options headers
#      listed below (std types only), whose types it parses into (one definition).
#   3. Nothing outside app/ includes app/.
# Run by ctest (module_includes, label unit) and by hand: tests/lint/module_includes.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO/proxy"

# Modules not yet converted to options of their own, allowed to include config/ until they are
# (none left: http/ takes http::ProxyOptions since [N]).
NOT_YET_AT_THE_DOOR=()

# The runtime modules' plain headers config/ may include.
CONFIG_MAY_INCLUDE=(tls/tls_options.hpp relay/message_template.hpp relay/outbox_row.hpp http/client_limits.hpp)
# Modules below config/ (pure, no runtime): config/ may include any of their headers.
BELOW_CONFIG=(core crypto fingerprint)

failures=()

allowed_module() {
  local module=$1 m
  for m in app config "${NOT_YET_AT_THE_DOOR[@]}"; do [ "$module" = "$m" ] && return 0; done
  return 1
}

# 1. includes of config/ and links to idem_config from runtime modules
while IFS= read -r hit; do
  file=${hit%%:*}
  allowed_module "${file%%/*}" || failures+=("proxy/$hit  (a runtime module includes config/: give it an options struct; app/ fills it)")
done < <(grep -rn --include='*.cpp' --include='*.hpp' '^#include "config/' . | sed 's#^\./##')
while IFS= read -r hit; do
  file=${hit%%:*}
  allowed_module "${file%%/*}" || failures+=("proxy/$hit  (a runtime module links the config library)")
done < <(grep -rnE --include=CMakeLists.txt 'idem_(relay_)?config\b' . | grep -v 'add_library\|target_include_directories\|^\./config/' | sed 's#^\./##')

# 2. what config/ includes
while IFS= read -r hit; do
  header=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$hit")
  module=${header%%/*}
  ok=0
  [ "$module" = config ] && ok=1
  for m in "${BELOW_CONFIG[@]}"; do [ "$module" = "$m" ] && ok=1; done
  for h in "${CONFIG_MAY_INCLUDE[@]}"; do [ "$header" = "$h" ] && ok=1; done
  [ "$ok" = 1 ] || failures+=("proxy/$hit  (config/ includes a runtime module's header that is not a plain options header)")
done < <(grep -rn --include='*.cpp' --include='*.hpp' '^#include "' config | sed 's#^\./##')

# 3. app/ included from outside app/
while IFS= read -r hit; do
  failures+=("proxy/$hit  (only app/ includes app/)")
done < <(grep -rn --include='*.cpp' --include='*.hpp' '^#include "app/' . | grep -v '^\./app/' | sed 's#^\./##' || true)

if [ "${#failures[@]}" -gt 0 ]; then
  printf '%s\n' "${failures[@]}" >&2
  echo "module_includes: ${#failures[@]} include(s) or link(s) break the layering (README: Architecture, Modules and layering)" >&2
  exit 1
fi
echo "module_includes: config/ reaches app/ only (not yet converted: ${NOT_YET_AT_THE_DOOR[*]:-none})"
