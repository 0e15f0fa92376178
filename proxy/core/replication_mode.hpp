#pragma once
// Whether a commit the primary acknowledged survives a failover: the pure reading of the two
// Postgres settings that decide it (README "Running on HA Postgres").
//
// A commit waits for a standby only when synchronous_standby_names names one (pg_auto_failover,
// Patroni and CloudNativePG set it on the primary when they run synchronous replication) and
// synchronous_commit asks to wait (on, remote_apply, remote_write; remote_write: the commit is in
// the standby's OS, not yet flushed, which survives the primary's failure but not a crash of both).
// Otherwise (no standby named, or synchronous_commit off/local) the primary acknowledges a commit
// before any standby has it, and a failover can lose it: a retry may then execute again.
#include <string>
#include <string_view>

namespace idem::core {

struct ReplicationSettings {
  std::string synchronous_commit;         // the session's effective value (ours asks for `on`)
  std::string synchronous_standby_names;  // the primary's
};

enum class ReplicationMode { synchronous, asynchronous };
std::string_view replication_mode_name(ReplicationMode mode);

ReplicationMode replication_mode(const ReplicationSettings& settings);

// One sentence for logs and --check: what the mode means for a retried request.
std::string_view replication_mode_meaning(ReplicationMode mode);

}  // namespace idem::core
