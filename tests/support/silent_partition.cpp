#include "support/silent_partition.hpp"

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "support/process.hpp"

namespace idem::test {

namespace {

constexpr const char* kNft = "/usr/sbin/nft";

RunResult nft(const std::string& commands) {
  ProcessSpec spec;
  spec.executable = kNft;
  spec.args = {commands};
  spec.log_dir = std::filesystem::temp_directory_path();
  spec.name = "nft";
  return run_to_exit(spec, std::chrono::seconds(10));
}

}  // namespace

SilentPartition::SilentPartition(std::uint16_t port) : table_("idem_test_partition_" + std::to_string(port)) {
  const std::string p = std::to_string(port);
  // Loopback packets of both directions pass the input hook: dropping there silences both ways.
  nft("delete table inet " + table_);  // a table left by a killed run of the same port
  const RunResult added = nft("add table inet " + table_ + "; add chain inet " + table_ +
                              " input { type filter hook input priority -150; }; add rule inet " + table_ +
                              " input tcp dport " + p + " drop; add rule inet " + table_ + " input tcp sport " + p +
                              " drop");
  if (added.exit_status != 0) {
    throw std::runtime_error("SilentPartition: nft could not drop port " + p + " (root and nftables needed): " +
                             added.stderr_text);
  }
  up_ = true;
}

SilentPartition::~SilentPartition() { lift(); }

void SilentPartition::lift() {
  if (!up_) return;
  nft("delete table inet " + table_);
  up_ = false;
}

}  // namespace idem::test
