#include "integration/pg_test_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

#include "store/pg/migrations.hpp"

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

std::string fresh_name(const std::string& prefix) {
  static std::mt19937_64 random(std::random_device{}());
  static const char* const digits = "0123456789abcdef";
  std::string name = prefix;
  for (std::uint64_t bits = random(), i = 0; i < 16; ++i, bits >>= 4) name.push_back(digits[bits & 0xF]);
  return name;
}

store::ClaimRequest claim_request(const std::string& scope, const std::string& key, const std::string& owner) {
  return store::ClaimRequest{.scope = scope,
                             .key = key,
                             .fingerprint = "v1:integration",
                             .owner = owner,
                             .ttl = std::chrono::minutes(5),
                             .lease = std::chrono::seconds(30),
                             .take_over_lapsed_lease = false};
}

std::string dsn_with(const std::string& dsn, const std::string& keyword, const std::string& value) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (options == nullptr) {
    std::string message = error != nullptr ? error : "cannot parse the DSN";
    PQfreemem(error);
    throw std::runtime_error(message);
  }
  const pg::ConninfoHandle owned(options);
  std::string result;
  const auto quoted = [](const std::string& text) {
    std::string out = "'";
    for (const char c : text) {
      if (c == '\'' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    return out + "'";
  };
  for (PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (keyword == option->keyword || option->val == nullptr) continue;
    result += std::string(option->keyword) + "=" + quoted(option->val) + " ";
  }
  return result + keyword + "=" + quoted(value);
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

BlockingClient::BlockingClient(const std::string& dsn) : connection_(PQconnectdb(dsn.c_str())) {}

BlockingClient::~BlockingClient() = default;

bool BlockingClient::ok() const { return connection_ && PQstatus(connection_.get()) == CONNECTION_OK; }

std::string BlockingClient::error() const {
  return last_error_.empty() && connection_ ? PQerrorMessage(connection_.get()) : last_error_;
}

std::optional<std::vector<std::string>> BlockingClient::exec(const std::string& sql,
                                                             const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const std::string& param : params) values.push_back(param.c_str());
  const pg::ResultHandle result(PQexecParams(connection_.get(), sql.c_str(), static_cast<int>(values.size()),
                                                    nullptr, values.data(), nullptr, nullptr, 0));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    last_error_ = result ? PQresultErrorMessage(result.get()) : PQerrorMessage(connection_.get());
    return std::nullopt;
  }
  std::vector<std::string> rows;
  for (int row = 0; row < PQntuples(result.get()); ++row) rows.emplace_back(PQgetvalue(result.get(), row, 0));
  last_error_.clear();
  return rows;
}

}  // namespace idem::test
