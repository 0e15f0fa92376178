// The `admin:` section, read by one reader for both binaries: every form is accepted by idemproxy
// and idemrelay alike, and problems keep their file:line:col.
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <unistd.h>

#include "config/config_loader.hpp"
#include "config/relay_config_loader.hpp"
#include "config_test_support.hpp"

namespace idem::config {
namespace {

using test::fake_env;

enum class Binary { idemproxy, idemrelay };

struct AdminLoad {
  std::optional<AdminConfig> admin;  // set when the file loaded without errors
  std::string issues;                // every issue, one "file:line:col: message" a line
};

template <class Result>
AdminLoad admin_of(const Result& result) {
  AdminLoad loaded;
  if (result.config) loaded.admin = result.config->admin;
  for (const ConfigIssue& issue : result.issues) loaded.issues += issue.to_string() + "\n";
  return loaded;
}

// `admin_yaml` goes on line 3 of the file, after each binary's one required line and a blank.
AdminLoad load_admin(Binary binary, std::string_view admin_yaml) {
  if (binary == Binary::idemproxy) {
    return admin_of(load_config_text("store: { postgres: { dsn: x } }\n\n" + std::string(admin_yaml), "test.yaml", fake_env()));
  }
  return admin_of(load_relay_config_text("postgres: { dsn: x }\nsink: { type: redis_streams }\n" + std::string(admin_yaml),
                                         "test.yaml", fake_env()));
}

class AdminSection : public ::testing::TestWithParam<Binary> {};

TEST_P(AdminSection, OffDisablesTheListener) {
  const AdminLoad loaded = load_admin(GetParam(), "admin: { listen: \"off\" }\n");
  ASSERT_TRUE(loaded.admin) << loaded.issues;
  EXPECT_FALSE(loaded.admin->enabled);
}

TEST_P(AdminSection, PortZeroAsksForAFreePort) {
  const AdminLoad loaded = load_admin(GetParam(), "admin: { listen: \"127.0.0.1:0\" }\n");
  ASSERT_TRUE(loaded.admin) << loaded.issues;
  EXPECT_TRUE(loaded.admin->enabled);
  EXPECT_EQ(loaded.admin->host, "127.0.0.1");
  EXPECT_EQ(loaded.admin->port, 0);
}

TEST_P(AdminSection, AnAddressEnablesTheListenerThere) {
  const AdminLoad loaded = load_admin(GetParam(), "admin: { listen: \"[::1]:9999\", token: t0k3n }\n");
  ASSERT_TRUE(loaded.admin) << loaded.issues;
  EXPECT_TRUE(loaded.admin->enabled);
  EXPECT_EQ(loaded.admin->host, "::1");
  EXPECT_EQ(loaded.admin->port, 9999);
  EXPECT_EQ(loaded.admin->token, "t0k3n");
}

TEST_P(AdminSection, TheTokenCanComeFromAFileWithoutItsTrailingNewline) {
  // Both parameters run at once under tests/run.sh, so each process writes its own file.
  const std::string path = ::testing::TempDir() + "admin_section_test_token." + std::to_string(::getpid());
  std::ofstream(path) << "s3cret\n";
  const AdminLoad loaded = load_admin(GetParam(), "admin: { listen: \"127.0.0.1:0\", token_file: \"" + path + "\" }\n");
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.admin) << loaded.issues;
  EXPECT_EQ(loaded.admin->token, "s3cret");
}

TEST_P(AdminSection, ProblemsArePlacedAtTheirValue) {
  const AdminLoad bad_address = load_admin(GetParam(), "admin: { listen: nowhere }\n");
  EXPECT_FALSE(bad_address.admin);
  const std::string example = GetParam() == Binary::idemproxy ? "127.0.0.1:9090" : "127.0.0.1:9465";
  EXPECT_NE(bad_address.issues.find("test.yaml:3:18: bad admin.listen address \"nowhere\" (expected host:port, e.g. " +
                                    example + ", or off)"),
            std::string::npos)
      << bad_address.issues;

  const AdminLoad both = load_admin(GetParam(), "admin: { token: a, token_file: /etc/hostname }\n");
  EXPECT_FALSE(both.admin);
  EXPECT_NE(both.issues.find("test.yaml:3:20: admin: give token or token_file, not both"), std::string::npos) << both.issues;

  const AdminLoad device = load_admin(GetParam(), "admin: { token_file: /dev/zero }\n");
  EXPECT_FALSE(device.admin);
  EXPECT_NE(device.issues.find("test.yaml:3:22: cannot read admin.token_file \"/dev/zero\": not a regular file"),
            std::string::npos)
      << device.issues;
}

INSTANTIATE_TEST_SUITE_P(BothBinaries, AdminSection, ::testing::Values(Binary::idemproxy, Binary::idemrelay),
                         [](const ::testing::TestParamInfo<Binary>& info) {
                           return info.param == Binary::idemproxy ? std::string("idemproxy") : std::string("idemrelay");
                         });

// Each binary keeps its own defaults: idemproxy's listener is on at 9090, idemrelay's off (9465 once listen is set).
TEST(AdminSectionDefaults, AreEachBinarys) {
  const AdminLoad proxy = load_admin(Binary::idemproxy, "");
  ASSERT_TRUE(proxy.admin) << proxy.issues;
  EXPECT_TRUE(proxy.admin->enabled);
  EXPECT_EQ(proxy.admin->port, 9090);
  const AdminLoad relay = load_admin(Binary::idemrelay, "");
  ASSERT_TRUE(relay.admin) << relay.issues;
  EXPECT_FALSE(relay.admin->enabled);
  EXPECT_EQ(relay.admin->port, 9465);
}

}  // namespace
}  // namespace idem::config
