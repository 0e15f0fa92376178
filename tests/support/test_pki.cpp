#include "support/test_pki.hpp"

#include <unistd.h>

#include <random>
#include <sstream>
#include <stdexcept>

#include "support/config_text.hpp"
#include "support/env.hpp"
#include "support/process.hpp"

namespace idem::test {

namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kOpensslTimeout{30};
constexpr std::string_view kValidDays = "2";

std::string find_openssl() {
  const auto path = env_var("PATH").value_or("/usr/bin:/bin");
  std::istringstream directories(path);
  std::string directory;
  while (std::getline(directories, directory, ':')) {
    if (directory.empty()) continue;
    const fs::path candidate = fs::path(directory) / "openssl";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error("TLS tests need the openssl command line tool in PATH");
}

// 63 random bits, top nibble 1..7: positive, never a leading zero, unique per certificate.
std::string random_serial() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string serial(1, kHex[1 + generator() % 7]);
  for (int i = 0; i < 15; ++i) serial.push_back(kHex[generator() % 16]);
  return serial;
}

// `command` followed by the options that make a fresh unencrypted P-256 key, then `rest`.
std::vector<std::string> with_new_ec_key(std::vector<std::string> command, const std::vector<std::string>& rest) {
  for (const char* option : {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}) {
    command.emplace_back(option);
  }
  command.insert(command.end(), rest.begin(), rest.end());
  return command;
}

}  // namespace

TestPki::TestPki(fs::path directory) : directory_(std::move(directory)), openssl_(find_openssl()) {}

void TestPki::run_openssl(const std::vector<std::string>& args) {
  ProcessSpec spec{openssl_, args, {}, directory_, "openssl"};
  const RunResult result = run_to_exit(spec, kOpensslTimeout);
  if (result.exit_status != 0) {
    std::string command = "openssl";
    for (const auto& arg : args) command += " " + arg;
    throw std::runtime_error(command + " failed:\n" + result.stdout_text + result.stderr_text);
  }
}

CertificateFiles TestPki::make_ca(std::string_view name) {
  CertificateFiles ca{directory_ / (std::string(name) + ".pem"), directory_ / (std::string(name) + ".key"),
                      random_serial(), std::string(name)};
  run_openssl(with_new_ec_key(
      {"req", "-x509"},
      {"-keyout", ca.key.string(), "-out", ca.cert.string(), "-days", std::string(kValidDays), "-subj",
       "/O=idemproxy tests/CN=" + ca.common_name, "-set_serial", "0x" + ca.serial, "-addext",
       "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"}));
  return ca;
}

CertificateFiles TestPki::issue(const CertificateFiles& ca, std::string_view name, std::string_view common_name,
                                std::string_view subject_alt_names, CertificateUse use) {
  const std::string stem(name);
  CertificateFiles leaf{directory_ / (stem + ".pem"), directory_ / (stem + ".key"), random_serial(),
                        std::string(common_name)};
  const fs::path request = directory_ / (stem + ".csr");
  const fs::path extensions = directory_ / (stem + ".ext");

  run_openssl(with_new_ec_key({"req", "-new"}, {"-keyout", leaf.key.string(), "-out", request.string(), "-subj",
                                                "/O=idemproxy tests/CN=" + leaf.common_name}));

  std::string extension_text = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n";
  extension_text += use == CertificateUse::server ? "extendedKeyUsage=serverAuth\n" : "extendedKeyUsage=clientAuth\n";
  if (!subject_alt_names.empty()) extension_text += "subjectAltName=" + std::string(subject_alt_names) + "\n";
  write_file(extensions, extension_text);
  run_openssl({"x509", "-req", "-in", request.string(), "-CA", ca.cert.string(), "-CAkey", ca.key.string(),
               "-set_serial", "0x" + leaf.serial, "-days", std::string(kValidDays), "-extfile", extensions.string(),
               "-out", leaf.cert.string()});
  return leaf;
}

}  // namespace idem::test
