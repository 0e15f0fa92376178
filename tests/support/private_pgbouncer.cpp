#include "support/private_pgbouncer.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "support/ports.hpp"

namespace idem::test {

namespace {

using namespace std::chrono_literals;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string ini(std::uint16_t postgres_port, std::uint16_t port, const std::filesystem::path& dir) {
  const std::string backend = "host=127.0.0.1 port=" + std::to_string(postgres_port);
  return "[databases]\n"
         "* = " +
         backend +
         " connect_query='SET synchronous_commit = on'\n"
         "[pgbouncer]\n"
         "listen_addr = 127.0.0.1\n"
         "listen_port = " +
         std::to_string(port) +
         "\n"
         "unix_socket_dir =\n"
         "auth_type = trust\n"
         "auth_file = " +
         (dir / "userlist.txt").string() +
         "\n"
         "pool_mode = transaction\n"
         "max_client_conn = 500\n"
         "default_pool_size = 40\n"
         "ignore_startup_parameters = extra_float_digits,options\n"
         "log_connections = 0\n"
         "log_disconnections = 0\n";
}

}  // namespace

PrivatePgBouncer::PrivatePgBouncer(std::uint16_t postgres_port) : dir_("idem-pgbouncer") {
  write_file(dir_.path() / "userlist.txt", "\"postgres\" \"\"\n");
  // pgbouncer refuses to run as root: as the postgres account then, which must read its files.
  const bool root = ::geteuid() == 0;
  if (root) std::filesystem::permissions(dir_.path(), std::filesystem::perms::all);
  std::string failures;
  // A port found free may be taken before pgbouncer binds it: a few tries, each with a fresh one.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::uint16_t port = free_port();
    const auto config = dir_.path() / ("pgbouncer-" + std::to_string(attempt) + ".ini");
    write_file(config, ini(postgres_port, port, dir_.path()));
    ProcessSpec spec =
        root ? ProcessSpec{"/usr/bin/setpriv",
                           {"--reuid=postgres", "--regid=postgres", "--init-groups", "--", "/usr/sbin/pgbouncer",
                            config.string()},
                           {},
                           dir_.path() / "logs",
                           "pgbouncer"}
             : ProcessSpec{"/usr/sbin/pgbouncer", {config.string()}, {}, dir_.path() / "logs", "pgbouncer"};
    process_.emplace(Process::start(spec));
    if (wait_for_port(port, 10s) && process_->running()) {
      port_ = port;
      dsn_ = "host=127.0.0.1 port=" + std::to_string(port) + " user=postgres dbname=postgres";
      return;
    }
    failures += process_->describe();
    process_->terminate(2s);
    process_.reset();
  }
  throw std::runtime_error("could not start a private pgbouncer:\n" + failures);
}

PrivatePgBouncer::~PrivatePgBouncer() {
  if (process_) process_->terminate(5s);
}

}  // namespace idem::test
