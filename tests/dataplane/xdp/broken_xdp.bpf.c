/* A program the verifier must refuse: it reads the frame's first byte without checking it against
 * data_end. Built as the production program is (dataplane/xdp/meson.build); xdp_verifier_test.cpp
 * checks that loading it fails with the verifier's reason in the error. Built a second time with
 * TXDP_BOUNDS_CHECKED, the check made: that one must load. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int broken_xdp(struct xdp_md *ctx) {
  const volatile __u8 *data = (const volatile __u8 *)(long)ctx->data;
#ifdef TXDP_BOUNDS_CHECKED
  if ((const void *)(data + 1) > (const void *)(long)ctx->data_end) return XDP_PASS;
#endif
  return data[0] == 0 ? XDP_DROP : XDP_PASS; /* unchecked: "invalid access to packet" */
}
