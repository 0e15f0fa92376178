#pragma once
// Private to config: the config schema. Walks a parsed YAML document into a Config, checking
// every option and the rules between options, and reporting each problem with its position.
#include <yaml-cpp/yaml.h>

#include "config/config_loader.hpp"
#include "config/yaml_reader.hpp"

namespace idem::config::detail {

// The returned Config is meaningful only when the reader's IssueSink holds no error. `running`:
// see load_config_file.
Config read_config(const YAML::Node& root, YamlReader& reader, const Config* running = nullptr);

}  // namespace idem::config::detail
