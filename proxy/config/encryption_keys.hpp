#pragma once
// Private to config: the store.encryption section. Key material is read here, at load time, from
// files and environment variables, so a bad key stops the start-up (or a reload) with its position.
#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {

// Reads `field` (store.encryption) into `encryption`, which is left off (empty) unless the whole
// section is valid. A section whose entries are all commented out leaves encryption off.
void read_encryption(const Field& field, YamlReader& yaml, EncryptionConfig& encryption);

}  // namespace idem::config::detail
