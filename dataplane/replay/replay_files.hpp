#pragma once
// The files tricolor-replay is given, checked before any output is opened (opening one truncates
// it): no output may be an input or another output, however the two paths are spelt ("./x", a
// symbolic or hard link, /dev/stdout while the table goes to standard output).
#include <optional>
#include <span>
#include <string>

namespace tricolor::dataplane {

struct NamedFile {
  std::string option;  // how the operator named it: "--in", "--csv", "standard output"
  std::string path;    // "/dev/stdout" for standard output
  bool output = false;
};

// The first pair of files that are the same and of which at least one is an output, as a sentence
// naming both; nothing if there is none. Character devices (a terminal, /dev/null) are never the
// same file: writes to them do not overwrite each other.
std::optional<std::string> same_file_conflict(std::span<const NamedFile> files);

}  // namespace tricolor::dataplane
