#include "ipc.hpp"

#include "fs.hpp"

#include <cstdio>

#include <sys/stat.h>

namespace unbounded {
namespace {

std::string mode_text(mode_t mode)
{
	char buf[8];
	std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
	return buf;
}

}  // namespace

std::vector<std::string> enumerate_ipc(const Context &ctx, std::vector<std::string> &warnings)
{
	std::vector<std::string> out;
	for (const auto &e : IPC_ENDPOINTS) {
		struct stat st{};
		if (::lstat(ctx.real(e.path).c_str(), &st) < 0)
			continue;  // not running, or never installed: nothing to offer
		std::string why;
		if (e.kind == IpcKind::Socket) {
			if (!S_ISSOCK(st.st_mode))
				why = std::string("it is ") + fs::file_type_name(st.st_mode) + ", not a socket";
		} else if (!S_ISDIR(st.st_mode)) {
			why = std::string("it is ") + fs::file_type_name(st.st_mode) + ", not a directory";
		} else if (st.st_uid != 0) {
			why = "it is owned by UID " + std::to_string(st.st_uid) + ", not by root";
		} else if (st.st_mode & 022) {
			why = "group or others may write it (mode " + mode_text(st.st_mode) + ")";
		}
		if (!why.empty()) {
			warnings.push_back("Not mounting " + std::string(e.path) + " into containers: " + why);
			continue;
		}
		out.emplace_back(e.path);
	}
	return out;
}

}  // namespace unbounded
