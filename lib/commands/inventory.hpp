// `attnprof devices` and `attnprof backends`: what is here, and what each backend runs on it.
#pragma once

namespace attnprof {

int devices_command();

struct BackendsRequest {
  int device = 0;
};

// Each backend's description, whether it runs on this GPU (and why not), and the problems it
// accepts; without a GPU, the problems alone.
int backends_command(const BackendsRequest& request);

}  // namespace attnprof
