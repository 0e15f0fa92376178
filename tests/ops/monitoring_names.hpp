#pragma once
// The metric names deploy/monitoring relies on (alert and recording rules, their promtool tests,
// the Grafana dashboard, the runbook) against what a binary really exports: a rule on a name
// nobody exports never fires, and a dashboard panel on one stays empty, both silently.
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace idem::test::ops {

// Every name starting with `prefix` (idemproxy_, idemrelay_) written in any file under
// `monitoring_dir`. Recording-rule names (level:metric:operations) contain a colon and are not
// metric names: they are left out.
std::set<std::string> monitoring_metric_names(const std::filesystem::path& monitoring_dir, std::string_view prefix);

// The names in `used` that are no series of `exposition` (text format). A histogram's family name
// counts as exported through its _bucket series.
std::vector<std::string> names_not_exported(const std::set<std::string>& used, std::string_view exposition);

}  // namespace idem::test::ops
