#!/usr/bin/env bash
# deploy/monitoring checked offline (ctest: monitoring_files, label "monitoring"); needs promtool
# (Debian package prometheus) and jq, both in deploy/local-env.sh's package list:
#   1. the rules file loads (promtool check rules) and its promtool unit tests pass;
#   2. every alert has a severity (critical or warning), a summary and a runbook_url whose anchor
#      is a heading of RUNBOOK.md, and a promtool case where it fires (labels and annotations
#      checked) and one where it stays quiet;
#   3. the PrometheusRule resource is what generate.sh makes of the rules file;
#   4. every PromQL expression of the Grafana dashboard parses: written as recording rules, with
#      the dashboard's variables replaced, for promtool check rules; the recorded series it reads
#      are recorded by the rules file. The dashboard has a $route variable.
# That the metric names exist is checked against real scrapes: tests/ops/monitoring_test.cpp and
# tests/relay/relay_monitoring_test.cpp.
#
#   tests/ops/monitoring_files.sh [DIR]     # DIR: the monitoring folder (default deploy/monitoring)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${1:-$REPO/deploy/monitoring}
RULES=$DIR/prometheus/idemproxy.rules.yml
DASHBOARD=$DIR/grafana/idemproxy.json
RUNBOOK=$DIR/RUNBOOK.md
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idem-monitoring.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failed=0
problem() {
  echo "  $*" >&2
  failed=1
}

# ---- 1. rules load, unit tests pass ----
if ! promtool check rules "$RULES" >"$WORK/check.out" 2>&1; then
  cat "$WORK/check.out" >&2
  problem "promtool check rules $RULES failed"
fi
if ! (cd "$DIR/prometheus/tests" && promtool test rules ./*.test.yml) >"$WORK/test.out" 2>&1; then
  cat "$WORK/test.out" >&2
  problem "promtool test rules failed"
fi

# ---- 2. each alert: severity, summary, runbook section, a firing and a quiet case ----
# GitHub's anchors for the runbook's headings: lower case, punctuation dropped, spaces to hyphens.
sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$RUNBOOK" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g' >"$WORK/anchors"
# One line per alert: name, severity, whether it has a summary, its runbook anchor.
awk '
  function flush() { if (name != "") print name, (severity == "" ? "-" : severity), summary, (anchor == "" ? "-" : anchor) }
  /^ *- (alert|record|name):/ { flush(); name = ""; severity = ""; summary = 0; anchor = "" }
  /^ *- alert:/ { name = $3 }
  /^ +severity:/ { severity = $2 }
  /^ +summary:/ { summary = 1 }
  /^ +runbook_url:/ { n = split($2, parts, "#"); anchor = (n == 2 ? parts[2] : "") }
  END { flush() }
' "$RULES" >"$WORK/alerts"
[ -s "$WORK/alerts" ] || problem "no alerts found in $RULES"
# Per alert in the promtool tests: a case with exp_alerts: [] (quiet) and one with alerts whose
# labels carry a severity and whose annotations carry summary and runbook_url (fires).
awk '
  /^ *alertname:/ { alert = $2; firing = 0 }
  /^ *exp_alerts: *\[\]/ { quiet[alert] = 1 }
  /^ *exp_alerts: *$/ { firing = 1 }
  firing && /^ +severity:/ { severity[alert] = 1 }
  firing && /^ +summary:/ { summary[alert] = 1 }
  firing && /^ +runbook_url:/ { runbook[alert] = 1 }
  END { for (a in quiet) print a, "quiet"; for (a in severity) if (summary[a] && runbook[a]) print a, "fires" }
' "$DIR"/prometheus/tests/*.test.yml >"$WORK/cases"
while read -r name severity summary anchor; do
  case "$severity" in critical | warning) ;; *) problem "$name: severity is $severity, not critical or warning" ;; esac
  [ "$summary" = 1 ] || problem "$name: no summary"
  grep -qxF -- "$anchor" "$WORK/anchors" || problem "$name: runbook_url anchor #$anchor is no heading of RUNBOOK.md"
  grep -qxF "$name fires" "$WORK/cases" || problem "$name: no promtool case where it fires with labels and annotations checked"
  grep -qxF "$name quiet" "$WORK/cases" || problem "$name: no promtool case where it stays quiet"
done <"$WORK/alerts"

# ---- 3. the PrometheusRule is generated from the rules file ----
if ! diff -u "$DIR/kubernetes/prometheusrule.yaml" <(bash "$DIR/generate.sh" --stdout) >"$WORK/diff.out"; then
  head -n 40 "$WORK/diff.out" >&2
  problem "kubernetes/prometheusrule.yaml differs from the rules file: run deploy/monitoring/generate.sh"
fi

# ---- 4. the dashboard's expressions parse ----
jq -e '.templating.list[] | select(.name == "route")' "$DASHBOARD" >/dev/null ||
  problem "the dashboard has no \$route variable"
# Panel queries, and the metric each label_values() variable query reads.
jq -r '[.. | objects | select(has("expr")) | .expr | strings] +
       [.templating.list[] | select(.type == "query") | .query.query // .query | strings
        | capture("^label_values\\((?<m>[^,]+),").m]
       | .[] | gsub("\n"; " ")' "$DASHBOARD" >"$WORK/expressions"
count=$(wc -l <"$WORK/expressions")
[ "$count" -ge 20 ] || problem "only $count expressions found in the dashboard"
# Grafana's variables as the values they take: $route a regular expression, the intervals durations.
sed -e 's/\$__rate_interval/5m/g; s/\$__interval/1m/g; s/\$__range/1h/g; s/\$route/.*/g' "$WORK/expressions" >"$WORK/substituted"
if grep -n '\$' "$WORK/substituted" >&2; then problem "dashboard expressions use variables this check does not know"; fi
jq -R -s '{groups: [{name: "dashboard", rules: (split("\n") | map(select(length > 0))
          | to_entries | map({record: "dashboard:expression_\(.key)", expr: .value}))}]}' \
  "$WORK/substituted" >"$WORK/dashboard.rules.json"
if ! promtool check rules "$WORK/dashboard.rules.json" >"$WORK/dashboard.out" 2>&1; then
  cat "$WORK/dashboard.out" >&2
  problem "dashboard expressions do not parse"
fi

# Recorded series the dashboard reads are recorded by the rules file.
sed -n 's/^ *- record: *//p' "$RULES" | sort -u >"$WORK/records"
grep -oE '[a-z_]+:[a-z_]+:[a-z0-9_]+' "$WORK/expressions" | sort -u >"$WORK/recorded_in_dashboard"
for name in $(comm -23 "$WORK/recorded_in_dashboard" "$WORK/records"); do
  problem "the dashboard reads $name, which no recording rule records"
done

if [ "$failed" = 0 ]; then
  echo "deploy/monitoring: $(wc -l <"$WORK/alerts") alerts tested and documented, PrometheusRule in step, $count dashboard expressions parse"
fi
exit "$failed"
