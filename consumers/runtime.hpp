// The slice of the Container Runtime Interface the consumers' helper uses: the pods kubelet runs, their
// containers, and a stop. Behind an interface so that follow.cpp's logic is the same against
// containerd, CRI-O, or the tests' fake runtime (a CRI server of their own on a socket).
#pragma once

#include "config.hpp"
#include "error.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace unbounded {

struct PodInfo {
	std::string id, uid, name, pod_namespace;
};

struct ContainerInfo {
	std::string id, name, pod_id;
	std::int64_t created_at = 0;  // nanoseconds since the epoch, as the runtime reports it
};

class Runtime {
public:
	virtual ~Runtime() = default;
	// "containerd v1.7.24": who answers (and that it does).
	virtual Result<std::string> version() = 0;
	// The ready pods that carry every one of `labels`.
	virtual Result<std::vector<PodInfo>> ready_pods(const std::map<std::string, std::string> &labels) = 0;
	// The running containers of a pod.
	virtual Result<std::vector<ContainerInfo>> running_containers(const std::string &pod_id) = 0;
	// StopContainer: SIGTERM, then SIGKILL after `grace`; kubelet starts the container again as the
	// pod's restart policy says (Always for the DaemonSets that run the consumers).
	virtual Result<void> stop(const std::string &container_id, Millis grace) = 0;
};

// The CRI's RuntimeService over the unix socket `socket`, every call bounded by `call_timeout`.
std::unique_ptr<Runtime> connect_cri(const std::string &socket, Millis call_timeout);

}  // namespace unbounded
