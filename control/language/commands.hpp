#pragma once
// One command line run on a Store (store.hpp): the commands of the language. Internal to control/.
#include <string>
#include <string_view>

#include "control/language/store.hpp"
#include "policer/expected.hpp"

namespace tricolor::control::detail {

// Whether list and show format their output. A loaded file discards it, so they cost nothing there
// (a file of 100k `show` lines stays linear); they are still checked.
enum class Output : bool { discard, produce };

// Runs one command line. A command that fails changes nothing in the store; one that succeeds
// changes only what it says.
Expected<std::string> run_command(Store& store, std::string_view line, Output output);

}  // namespace tricolor::control::detail
