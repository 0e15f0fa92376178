// store.encryption: keys read from files and environment variables at load time, and every way
// the section can be wrong, each reported at its position without quoting key material.
#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config_loader.hpp"
#include "config_test_support.hpp"

namespace idem::config {
namespace {

using test::all_issues;
using test::fake_env;
using test::load;

using Key = std::array<std::uint8_t, 32>;

// 32 bytes 0x00..0x1f, and 32 bytes 0xa0..0xbf, each in one spelling.
constexpr std::string_view kCountingHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
constexpr std::string_view kHighBase64 = "oKGio6SlpqeoqaqrrK2ur7CxsrO0tba3uLm6u7y9vr8=";

Key bytes_from(std::uint8_t first) {
  Key key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(first + i);
  return key;
}

// A directory of key files for one test, removed afterwards.
class KeyFiles {
 public:
  KeyFiles() {
    std::string pattern = (std::filesystem::temp_directory_path() / "idem-enc-config-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
  }
  ~KeyFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  KeyFiles(const KeyFiles&) = delete;
  KeyFiles& operator=(const KeyFiles&) = delete;

  std::string write(const std::string& name, std::string_view content) const {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

// "line:col" (1-based) of the first occurrence of `needle` in `text`: where an issue must point.
std::string position_of(std::string_view text, std::string_view needle) {
  const std::size_t at = text.find(needle);
  if (at == std::string_view::npos) return "(not found: " + std::string(needle) + ")";
  const std::string_view before = text.substr(0, at);
  const std::size_t line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  const std::size_t line_start = before.rfind('\n');
  const std::size_t column = line_start == std::string_view::npos ? at + 1 : at - line_start;
  return std::to_string(line) + ":" + std::to_string(column);
}

std::string store_with(std::string_view encryption) {
  return "store:\n  postgres: { dsn: x }\n  encryption:\n" + std::string(encryption);
}

// The one issue of `result`, asserted to be an error.
std::string only_error(const LoadResult& result) {
  EXPECT_FALSE(result.config.has_value());
  EXPECT_EQ(result.issues.size(), 1u) << all_issues(result);
  if (result.issues.empty()) return "";
  EXPECT_FALSE(result.issues.front().warning);
  return result.issues.front().to_string();
}

TEST(EncryptionConfig, OffWhenAbsent) {
  const LoadResult result = load("store: { postgres: { dsn: x } }\n");
  ASSERT_TRUE(result.config.has_value()) << all_issues(result);
  EXPECT_FALSE(result.config->store.encryption.enabled());
  EXPECT_TRUE(result.config->store.encryption.keys.empty());
}

TEST(EncryptionConfig, OffWhenEveryEntryIsCommentedOut) {
  const LoadResult result = load(store_with("    # current_key: k1\n    # keys: []\n"));
  ASSERT_TRUE(result.config.has_value()) << all_issues(result);
  EXPECT_FALSE(result.config->store.encryption.enabled());
}

TEST(EncryptionConfig, KeysComeFromFilesAndEnvironmentInHexOrBase64) {
  const KeyFiles files;
  const std::string k1 = files.write("k1", std::string(kCountingHex) + "\n");
  const LoadResult result = load(store_with("    current_key: k2\n    keys:\n      - { id: k1, file: " + k1 +
                                            " }\n      - { id: k2, env: IDEM_KEY_K2 }\n"),
                                 fake_env({{"IDEM_KEY_K2", std::string(kHighBase64)}}));
  ASSERT_TRUE(result.config.has_value()) << all_issues(result);
  const EncryptionConfig& encryption = result.config->store.encryption;
  EXPECT_TRUE(encryption.enabled());
  EXPECT_EQ(encryption.current_key, "k2");
  ASSERT_EQ(encryption.keys.size(), 2u);
  EXPECT_EQ(encryption.keys[0].id, "k1");
  EXPECT_EQ(encryption.keys[0].key, bytes_from(0x00));
  EXPECT_EQ(encryption.keys[0].source, "file " + k1);
  EXPECT_EQ(encryption.keys[1].id, "k2");
  EXPECT_EQ(encryption.keys[1].key, bytes_from(0xa0));
  EXPECT_EQ(encryption.keys[1].source, "env IDEM_KEY_K2");
}

TEST(EncryptionConfig, FilePathsTakeVariables) {
  const KeyFiles files;
  files.write("k1", kHighBase64);
  const LoadResult result = load(store_with("    current_key: k1\n    keys: [{ id: k1, file: \"${KEY_DIR}/k1\" }]\n"),
                                 fake_env({{"KEY_DIR", files.dir()}}));
  ASSERT_TRUE(result.config.has_value()) << all_issues(result);
  EXPECT_EQ(result.config->store.encryption.keys.at(0).key, bytes_from(0xa0));
}

TEST(EncryptionConfig, UnknownCurrentKeyNamesTheKnownIds) {
  const std::string yaml = store_with("    current_key: k3\n    keys:\n      - { id: k1, env: A }\n      - { id: k2, env: B }\n");
  const LoadResult result = load(yaml, fake_env({{"A", std::string(kCountingHex)}, {"B", std::string(kHighBase64)}}));
  EXPECT_EQ(only_error(result), "test.yaml:" + position_of(yaml, "k3") +
                                    ": store.encryption.current_key \"k3\" is not among store.encryption.keys (ids: k1, k2)");
}

TEST(EncryptionConfig, DuplicateIdsAreRefused) {
  const std::string yaml = store_with("    current_key: k1\n    keys:\n      - { id: k1, env: A }\n      - { id: k1, env: B }\n");
  const LoadResult result = load(yaml, fake_env({{"A", std::string(kCountingHex)}, {"B", std::string(kHighBase64)}}));
  EXPECT_EQ(only_error(result), "test.yaml:" + position_of(yaml, "k1, env: B") +
                                    ": duplicate key id \"k1\" in store.encryption.keys (first used at line 6)");
}

TEST(EncryptionConfig, KeyOfTheWrongLengthIsRefusedWithoutQuotingIt) {
  const KeyFiles files;
  const std::string short_hex(kCountingHex.substr(0, 62));
  const std::string path = files.write("short", short_hex + "\n");
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, file: " + path + " }]\n");
  const std::string error = only_error(load(yaml));
  EXPECT_EQ(error, "test.yaml:" + position_of(yaml, path) + ": store.encryption.keys[0].file: file \"" + path +
                       "\": the key decodes (as hex) to 31 bytes; a key must be exactly 32 bytes, written as 64 hex "
                       "digits or 44 base64 characters (e.g. `openssl rand -base64 32`)");
  EXPECT_EQ(error.find(short_hex), std::string::npos);
}

TEST(EncryptionConfig, KeyThatIsNeitherHexNorBase64IsRefusedWithoutQuotingIt) {
  const std::string secret = "correct horse battery staple, not a key!";
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, env: IDEM_KEY }]\n");
  const std::string error = only_error(load(yaml, fake_env({{"IDEM_KEY", secret}})));
  EXPECT_EQ(error, "test.yaml:" + position_of(yaml, "IDEM_KEY") +
                       ": store.encryption.keys[0].env: environment variable IDEM_KEY: the key is neither hex nor "
                       "base64; a key must be exactly 32 bytes, written as 64 hex digits or 44 base64 characters (e.g. "
                       "`openssl rand -base64 32`)");
  EXPECT_EQ(error.find("horse"), std::string::npos);
}

TEST(EncryptionConfig, MissingFileIsReportedWithTheSystemsReason) {
  const KeyFiles files;
  const std::string path = files.path("absent");
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, file: " + path + " }]\n");
  EXPECT_EQ(only_error(load(yaml)), "test.yaml:" + position_of(yaml, path) + ": store.encryption.keys[0].file: cannot read \"" +
                                        path + "\": No such file or directory");
}

TEST(EncryptionConfig, DirectoryIsNotAKeyFile) {
  const KeyFiles files;
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, file: " + files.dir() + " }]\n");
  const std::string error = only_error(load(yaml));
  EXPECT_NE(error.find("store.encryption.keys[0].file: cannot read \"" + files.dir() + "\""), std::string::npos) << error;
}

TEST(EncryptionConfig, OversizedFileIsRefused) {
  const KeyFiles files;
  const std::string path = files.write("big", std::string(5000, 'A'));
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, file: " + path + " }]\n");
  EXPECT_EQ(only_error(load(yaml)), "test.yaml:" + position_of(yaml, path) + ": store.encryption.keys[0].file: \"" + path +
                                        "\" is larger than 4096 bytes");
}

TEST(EncryptionConfig, UnsetVariableIsReported) {
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, env: IDEM_MISSING_KEY }]\n");
  EXPECT_EQ(only_error(load(yaml)), "test.yaml:" + position_of(yaml, "IDEM_MISSING_KEY") +
                                        ": store.encryption.keys[0].env: environment variable IDEM_MISSING_KEY is not set");
}

TEST(EncryptionConfig, EmptyVariableIsAnEmptyKey) {
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, env: IDEM_EMPTY_KEY }]\n");
  const std::string error = only_error(load(yaml, fake_env({{"IDEM_EMPTY_KEY", ""}})));
  EXPECT_NE(error.find("environment variable IDEM_EMPTY_KEY: the key is empty"), std::string::npos) << error;
}

TEST(EncryptionConfig, EachKeyNeedsExactlyOneSource) {
  const std::string both = store_with("    current_key: k1\n    keys: [{ id: k1, env: A, file: /x }]\n");
  EXPECT_EQ(only_error(load(both, fake_env({{"A", std::string(kCountingHex)}}))),
            "test.yaml:" + position_of(both, "file") + ": store.encryption.keys[0]: give file or env, not both");
  const std::string neither = store_with("    current_key: k1\n    keys: [{ id: k1 }]\n");
  EXPECT_EQ(only_error(load(neither)), "test.yaml:" + position_of(neither, "{ id: k1 }") +
                                           ": store.encryption.keys[0] needs file (a path) or env (a variable name) holding the key");
}

TEST(EncryptionConfig, IdsAreRequiredAndPlain) {
  const std::string missing = store_with("    current_key: k1\n    keys: [{ env: A }]\n");
  EXPECT_EQ(only_error(load(missing, fake_env({{"A", std::string(kCountingHex)}}))),
            "test.yaml:" + position_of(missing, "{ env: A }") +
                               ": store.encryption.keys[0].id is required (the name stored with each record this key seals)");
  const std::string bad = store_with("    current_key: k1\n    keys: [{ id: \"k 1\", env: A }]\n");
  EXPECT_EQ(only_error(load(bad, fake_env({{"A", std::string(kCountingHex)}}))),
            "test.yaml:" + position_of(bad, "\"k 1\"") +
                ": bad key id \"k 1\" in store.encryption.keys[0].id (expected 1-64 letters, digits, '.', '_' or '-')");
}

TEST(EncryptionConfig, CurrentKeyAndKeysAreBothRequired) {
  const std::string no_current = store_with("    keys: [{ id: k1, env: A }]\n");
  EXPECT_EQ(only_error(load(no_current, fake_env({{"A", std::string(kCountingHex)}}))),
            "test.yaml:" + position_of(no_current, "keys") +
                ": store.encryption.current_key is required (the id of the key new records are sealed with)");
  const std::string no_keys = store_with("    current_key: k1\n");
  EXPECT_EQ(only_error(load(no_keys)),
            "test.yaml:" + position_of(no_keys, "current_key") +
                ": store.encryption.keys is required (e.g. - { id: k1, file: /run/secrets/idemproxy/k1 })");
  const std::string empty_keys = store_with("    current_key: k1\n    keys: []\n");
  EXPECT_EQ(only_error(load(empty_keys)),
            "test.yaml:" + position_of(empty_keys, "[]") +
                ": store.encryption.keys lists no key (e.g. - { id: k1, file: /run/secrets/idemproxy/k1 })");
}

TEST(EncryptionConfig, UnknownOptionsAreReported) {
  const std::string yaml = store_with("    current_key: k1\n    keys: [{ id: k1, env: A, value: abc }]\n");
  EXPECT_EQ(only_error(load(yaml, fake_env({{"A", std::string(kCountingHex)}}))),
            "test.yaml:" + position_of(yaml, "value") +
                ": unknown key \"value\" in store.encryption.keys[0] (expected one of: id, file, env)");
}

TEST(EncryptionConfig, EveryBadKeyIsReportedInOneLoad) {
  const std::string yaml =
      store_with("    current_key: k1\n    keys:\n      - { id: k1, env: UNSET_ONE }\n      - { id: k2, env: UNSET_TWO }\n");
  const LoadResult result = load(yaml);
  EXPECT_FALSE(result.config.has_value());
  ASSERT_EQ(result.issues.size(), 2u) << all_issues(result);
  EXPECT_NE(result.issues[0].message.find("UNSET_ONE is not set"), std::string::npos);
  EXPECT_NE(result.issues[1].message.find("UNSET_TWO is not set"), std::string::npos);
}

// The commented-out section of the shipped example, uncommented, is valid as documented.
TEST(EncryptionConfig, ExampleSectionLoadsOnceUncommented) {
  const std::filesystem::path example = IDEMPROXY_EXAMPLE_CONFIG;
  std::ifstream in(example);
  ASSERT_TRUE(in) << example;
  std::string section;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "  # encryption:") inside = true;
    if (inside && !line.starts_with("  # ")) break;
    if (inside) section += "  " + line.substr(4) + "\n";
  }
  ASSERT_FALSE(section.empty()) << "no `  # encryption:` block in " << example;

  const KeyFiles files;
  const std::string k1 = files.write("k1", kHighBase64);
  const std::string documented_path = "/run/secrets/idemproxy/k1";
  const std::size_t at = section.find(documented_path);
  ASSERT_NE(at, std::string::npos) << section;
  section.replace(at, documented_path.size(), k1);

  const LoadResult result = load("store:\n  postgres: { dsn: x }\n" + section,
                                 fake_env({{"IDEMPROXY_RECORD_KEY_K2", std::string(kCountingHex)}}));
  ASSERT_TRUE(result.config.has_value()) << section << all_issues(result);
  const EncryptionConfig& encryption = result.config->store.encryption;
  EXPECT_EQ(encryption.current_key, "k2");
  ASSERT_EQ(encryption.keys.size(), 2u);
  EXPECT_EQ(encryption.keys[0].key, bytes_from(0xa0));
  EXPECT_EQ(encryption.keys[1].key, bytes_from(0x00));
}

}  // namespace
}  // namespace idem::config
