#include "integration/pg_test_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "store/pg/migrations.hpp"
#include "support/random_hex.hpp"

namespace idem::test {

void PgTest::SetUp() {
  const char* dsn = std::getenv("IDEMPROXY_TEST_PG_DSN");
  if (dsn == nullptr || *dsn == '\0') {
    GTEST_FAIL() << "IDEMPROXY_TEST_PG_DSN is not set: the Postgres integration tests need a real server "
                    "(e.g. IDEMPROXY_TEST_PG_DSN='host=127.0.0.1 port=55432 user=postgres dbname=postgres')";
  }
  dsn_ = dsn;
  static const pg::MigrateResult migrated = store::pg::migrate(dsn_);
  ASSERT_TRUE(migrated.ok) << "migrate: " << migrated.error;
}

bool run_until(boost::asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  io.restart();
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string fresh_name(const std::string& prefix) { return prefix + random_hex(16); }

store::ClaimRequest claim_request(const std::string& scope, const std::string& key, const std::string& owner) {
  return store::ClaimRequest{.scope = scope,
                             .key = key,
                             .fingerprint = "v1:integration",
                             .owner = owner,
                             .ttl = std::chrono::minutes(5),
                             .lease = std::chrono::seconds(30),
                             .take_over_lapsed_lease = false};
}

int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("bind() failed");
  }
  ::close(fd);  // never listened on: connecting is refused
  return ntohs(address.sin_port);
}

}  // namespace idem::test
