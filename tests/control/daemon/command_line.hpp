#pragma once
// tricolord's command line parsed from a list of arguments, as main() would parse argv: for the tests
// of its options.
#include <string>
#include <vector>

#include "control/daemon/tricolord_options.hpp"

namespace tricolor::control {

inline ParsedCommandLine parse_arguments(std::vector<std::string> args) {
  args.insert(args.begin(), "tricolord");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

}  // namespace tricolor::control
