/* The baseline of tricolor-bench-xdp: an XDP program that drops every frame and does nothing else,
 * built and run the same way as tricolor_xdp.bpf.c. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int xdp_drop(struct xdp_md *ctx) {
  (void)ctx;
  return XDP_DROP;
}
