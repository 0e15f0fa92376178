#pragma once
// A network partition as both ends see it: every packet to and from one local TCP port is dropped
// without a trace (no RST, no ICMP, no FIN). Open connections stall until their owner's deadline;
// new ones never finish the handshake. Not a refused or reset connection: silence.
//
// nftables, in a table of its own named after the port (so nothing else on the machine is
// touched), in the test's network namespace. Needs root (CAP_NET_ADMIN) and the nft binary: the
// constructor throws std::runtime_error with nft's own message when it cannot. The destructor
// lifts the partition.
#include <cstdint>
#include <string>

namespace idem::test {

class SilentPartition {
 public:
  explicit SilentPartition(std::uint16_t port);
  ~SilentPartition();
  SilentPartition(const SilentPartition&) = delete;
  SilentPartition& operator=(const SilentPartition&) = delete;

  // Packets flow again (connections that survived their owners' deadlines resume). Idempotent.
  void lift();

 private:
  std::string table_;
  bool up_ = false;
};

}  // namespace idem::test
