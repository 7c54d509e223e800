// The NVIDIA daemons' IPC endpoints a pod may talk to, as nvidia-ctk's IPC discoverer offers them:
// nvidia-persistenced's and the fabric manager's sockets, and the MPS pipe directory. Each is
// mounted (at the same path) only while it is in the machine, and only what its owner could have
// made: /run is root's, but /tmp is everyone's, so the MPS directory must be root's and writable by
// nobody else (a fake control pipe there would talk to every GPU pod).
#pragma once

#include "context.hpp"

#include <string>
#include <vector>

namespace unbounded {

enum class IpcKind {
	Socket,
	Directory,
};

struct IpcEndpoint {
	const char *path;  // in the machine, and in the container
	IpcKind kind;
};

inline constexpr IpcEndpoint IPC_ENDPOINTS[] = {
	{"/run/nvidia-persistenced/socket", IpcKind::Socket},
	{"/run/nvidia-fabricmanager/socket", IpcKind::Socket},
	// CUDA_MPS_PIPE_DIRECTORY's default; a daemon started with another is the operator's to mount.
	{"/tmp/nvidia-mps", IpcKind::Directory},
};

// The endpoints present, in IPC_ENDPOINTS order; one warning for each that is there but refused.
std::vector<std::string> enumerate_ipc(const Context &ctx, std::vector<std::string> &warnings);

}  // namespace unbounded
