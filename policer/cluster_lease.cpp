#include "policer/cluster_lease.hpp"

namespace tricolor::policer {

std::string_view to_string(ClusterMode mode) noexcept {
  switch (mode) {
    case ClusterMode::leased: return "leased";
    case ClusterMode::share: return "share";
    case ClusterMode::open: return "open";
    case ClusterMode::closed: return "closed";
  }
  return "?";
}

}  // namespace tricolor::policer
