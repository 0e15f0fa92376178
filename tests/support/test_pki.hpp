#pragma once
// Throwaway certificates for TLS tests, made at test time with the `openssl` command line tool
// (EC P-256 keys, valid for two days) in a directory the test owns. Nothing is trusted by the
// system: a test hands the CA file to whichever side verifies.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace idem::test {

struct CertificateFiles {
  std::filesystem::path cert;  // PEM certificate
  std::filesystem::path key;   // PEM private key, unencrypted
  std::string serial;          // upper-case hex without leading zeros (as OpenSSL's BN_bn2hex prints it)
  std::string common_name;
};

enum class CertificateUse { server, client };

class TestPki {
 public:
  // Files go to `directory`, which must exist. Throws std::runtime_error without an openssl tool.
  explicit TestPki(std::filesystem::path directory);

  // A self-signed CA; `name` is its file stem and common name.
  CertificateFiles make_ca(std::string_view name);
  // A certificate issued by `ca`. `subject_alt_names` as OpenSSL writes them, e.g.
  // "DNS:localhost,IP:127.0.0.1" (servers); may be empty for clients. Throws on failure, with the
  // tool's output.
  CertificateFiles issue(const CertificateFiles& ca, std::string_view name, std::string_view common_name,
                         std::string_view subject_alt_names, CertificateUse use);

  const std::filesystem::path& directory() const { return directory_; }

 private:
  void run_openssl(const std::vector<std::string>& args);

  std::filesystem::path directory_;
  std::string openssl_;
};

}  // namespace idem::test
