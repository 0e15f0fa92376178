#include "core/replication_mode.hpp"

#include "core/ascii.hpp"

namespace idem::core {
std::string_view replication_mode_name(ReplicationMode mode) {
  switch (mode) {
    case ReplicationMode::synchronous: return "synchronous";
    case ReplicationMode::asynchronous: return "asynchronous";
  }
  return "invalid";
}

ReplicationMode replication_mode(const ReplicationSettings& settings) {
  if (ascii::trim_ows(settings.synchronous_standby_names).empty()) return ReplicationMode::asynchronous;
  const std::string_view commit = settings.synchronous_commit;
  // The values synchronous_commit accepts that make a commit wait for the standbys: on (and its
  // boolean spellings), remote_apply, remote_write. off and local do not wait.
  for (const std::string_view waits : {"on", "true", "yes", "1", "remote_apply", "remote_write"}) {
    if (ascii::iequals(commit, waits)) return ReplicationMode::synchronous;
  }
  return ReplicationMode::asynchronous;
}

std::string_view replication_mode_meaning(ReplicationMode mode) {
  switch (mode) {
    case ReplicationMode::synchronous:
      return "a commit is acknowledged only once a standby has it: a failover loses no acknowledged claim or completion";
    case ReplicationMode::asynchronous:
      return "an acknowledged claim or completion can be lost on failover: a retry may execute again";
  }
  return "invalid";
}

}  // namespace idem::core
