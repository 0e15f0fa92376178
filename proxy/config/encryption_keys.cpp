#include "config/encryption_keys.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "config/config_file.hpp"
#include "crypto/key_material.hpp"
#include "crypto/keyring.hpp"

namespace idem::config::detail {
namespace {

const std::vector<std::string_view> kEncryptionKeys = {"current_key", "keys"};
const std::vector<std::string_view> kKeyEntryKeys = {"id", "file", "env"};
constexpr std::string_view kSection = "store.encryption";
// A key file holds one key (64 hex digits or 44 base64 characters, maybe a newline).
constexpr std::size_t kMaxKeyFileBytes = 4096;

struct KeyText {
  std::optional<std::string> text;
  std::string problem;
};

KeyText read_key_file(const std::string& path) {
  auto contents = read_bounded_file(path, kMaxKeyFileBytes, quoted(path));
  if (auto* error = std::get_if<FileError>(&contents)) return {std::nullopt, std::move(error->message)};
  return {std::move(std::get<std::string>(contents)), {}};
}

class EncryptionReader {
 public:
  explicit EncryptionReader(YamlReader& yaml) : yaml_(yaml), issues_(yaml.issues()) {}

  void read(const Field& field, EncryptionConfig& encryption);

 private:
  void error(const YAML::Mark& at, std::string message) {
    issues_.error(at, std::move(message));
    valid_ = false;
  }
  void read_key(const YAML::Node& element, const YAML::Mark& fallback, const std::string& path);
  std::optional<std::array<std::uint8_t, 32>> load_key(const Field& source, const std::string& path,
                                                       std::string& description);

  YamlReader& yaml_;
  IssueSink& issues_;
  bool valid_ = true;
  // False when some entry has no usable id: current_key cannot then be checked against the ids.
  bool ids_complete_ = true;
  std::vector<EncryptionKeyConfig> keys_;
  std::map<std::string, int, std::less<>> first_line_of_id_;  // every id read, even if its key failed
};

void EncryptionReader::read(const Field& field, EncryptionConfig& encryption) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), kSection, kEncryptionKeys);
  if (!fields) return;
  const Field* current = fields->find("current_key");
  const Field* keys = fields->find("keys");
  if (current == nullptr && keys == nullptr) return;  // every entry commented out: encryption stays off

  const std::string keys_path = std::string(kSection) + ".keys";
  if (keys != nullptr) {
    if (const std::optional<std::vector<YAML::Node>> elements = yaml_.sequence(*keys, keys_path)) {
      for (std::size_t index = 0; index < elements->size(); ++index) {
        read_key((*elements)[index], keys->key.Mark(), keys_path + "[" + std::to_string(index) + "]");
      }
      if (elements->empty()) {
        error(keys->value.Mark(), keys_path + " lists no key (e.g. - { id: k1, file: /run/secrets/idemproxy/k1 })");
        ids_complete_ = false;
      }
    } else {
      valid_ = false;
      ids_complete_ = false;
    }
  } else {
    error(fields->mark(), keys_path + " is required (e.g. - { id: k1, file: /run/secrets/idemproxy/k1 })");
    ids_complete_ = false;
  }

  const std::string current_path = std::string(kSection) + ".current_key";
  std::string current_id;
  if (current == nullptr) {
    error(fields->mark(), current_path + " is required (the id of the key new records are sealed with)");
  } else if (std::optional<std::string> id = yaml_.string(*current, current_path)) {
    if (id->empty()) {
      error(current->value.Mark(), current_path + " is empty (the id of the key new records are sealed with)");
    } else if (!ids_complete_) {
      valid_ = false;  // the entries' own errors say what to fix first
    } else if (first_line_of_id_.find(*id) == first_line_of_id_.end()) {
      std::string known;
      for (const auto& [name, line] : first_line_of_id_) known += (known.empty() ? "" : ", ") + name;
      error(current->value.Mark(), current_path + " " + quoted(*id) + " is not among " + keys_path +
                                       (known.empty() ? std::string() : " (ids: " + known + ")"));
    } else {
      current_id = std::move(*id);
    }
  } else {
    valid_ = false;
  }

  if (!valid_) return;
  encryption.current_key = std::move(current_id);
  encryption.keys = std::move(keys_);
}

void EncryptionReader::read_key(const YAML::Node& element, const YAML::Mark& fallback, const std::string& path) {
  const std::optional<Fields> fields =
      yaml_.mapping(element, element.IsNull() ? fallback : element.Mark(), path, kKeyEntryKeys);
  if (!fields) {
    valid_ = false;
    ids_complete_ = false;
    return;
  }
  EncryptionKeyConfig key;
  bool key_valid = true;
  if (const Field* f = fields->find("id")) {
    if (std::optional<std::string> id = yaml_.string(*f, join_path(path, "id"))) {
      if (!crypto::is_valid_key_id(*id)) {
        error(f->value.Mark(), "bad key id " + quoted(*id) + " in " + join_path(path, "id") + " (expected 1-" +
                                   std::to_string(crypto::kMaxKeyIdLength) + " letters, digits, '.', '_' or '-')");
        key_valid = false;
        ids_complete_ = false;
      } else if (const auto first = first_line_of_id_.find(*id); first != first_line_of_id_.end()) {
        error(f->value.Mark(), "duplicate key id " + quoted(*id) + " in " + std::string(kSection) +
                                   ".keys (first used at line " + std::to_string(first->second) + ")");
        key_valid = false;
      } else {
        first_line_of_id_.emplace(*id, f->value.Mark().line + 1);
        key.id = std::move(*id);
      }
    } else {
      key_valid = false;
      ids_complete_ = false;
    }
  } else {
    error(fields->mark(), join_path(path, "id") + " is required (the name stored with each record this key seals)");
    key_valid = false;
    ids_complete_ = false;
  }

  const Field* file = fields->find("file");
  const Field* env = fields->find("env");
  std::optional<std::array<std::uint8_t, 32>> material;
  if (file != nullptr && env != nullptr) {
    const Field* second = file->key.Mark().pos > env->key.Mark().pos ? file : env;
    error(second->key.Mark(), path + ": give file or env, not both");
  } else if (file == nullptr && env == nullptr) {
    error(fields->mark(), path + " needs file (a path) or env (a variable name) holding the key");
  } else {
    material = load_key(file != nullptr ? *file : *env, path, key.source);
  }
  if (!material) key_valid = false;

  if (!key_valid) {
    valid_ = false;
    return;
  }
  key.key = *material;
  keys_.push_back(std::move(key));
}

// The key named by `source` (a file: or env: field), or nullopt after reporting why not.
std::optional<std::array<std::uint8_t, 32>> EncryptionReader::load_key(const Field& source, const std::string& path,
                                                                       std::string& description) {
  const bool from_file = source.name == "file";
  const std::string where = join_path(path, source.name);
  const std::optional<std::string> name = yaml_.string(source, where);
  if (!name) {
    valid_ = false;
    return std::nullopt;
  }
  if (name->empty()) {
    error(source.value.Mark(),
          where + " is empty (expected " + (from_file ? "a file path" : "an environment variable name") + ")");
    return std::nullopt;
  }

  KeyText text;
  if (from_file) {
    text = read_key_file(*name);
    description = "file " + *name;
  } else {
    text.text = yaml_.env()(*name);
    if (!text.text) text.problem = "environment variable " + *name + " is not set";
    description = "env " + *name;
  }
  if (!text.text) {
    error(source.value.Mark(), where + ": " + text.problem);
    return std::nullopt;
  }
  crypto::ParsedKey parsed = crypto::parse_key_material(*text.text);
  crypto::wipe_secret(*text.text);
  if (!parsed.key) {
    error(source.value.Mark(), where + ": " + (from_file ? "file " + quoted(*name) : "environment variable " + *name) +
                                   ": " + parsed.problem);
    return std::nullopt;
  }
  return *parsed.key;
}

}  // namespace

void read_encryption(const Field& field, YamlReader& yaml, EncryptionConfig& encryption) {
  EncryptionReader(yaml).read(field, encryption);
}

}  // namespace idem::config::detail
