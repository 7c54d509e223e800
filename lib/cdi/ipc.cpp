#include "ipc.hpp"

#include "fs.hpp"
#include "unique_fd.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>

namespace unbounded {
namespace {

std::string mode_text(mode_t mode)
{
	char buf[8];
	std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
	return buf;
}

// Why a directory on an endpoint's path could let someone other than root put another endpoint
// there, "" when it cannot. `holder`: it holds the endpoint itself (or is the MPS directory), where
// anyone who may write could add or swap an entry. Above it only renaming it away matters, and a
// sticky directory (/tmp, 1777) lets nobody but its owner rename root's entries.
std::string untrusted_dir(const std::string &display, const struct stat &st, bool holder)
{
	if (!S_ISDIR(st.st_mode))
		return display + " is " + fs::file_type_name(st.st_mode) + ", not a directory";
	if (st.st_uid != 0)
		return display + " is owned by UID " + std::to_string(st.st_uid) + ", not by root";
	if ((st.st_mode & 022) && (holder || !(st.st_mode & S_ISVTX)))
		return "group or others may write " + display + " (mode " + mode_text(st.st_mode) + ")";
	return "";
}

// Walks the endpoint's path from the machine's root one component at a time, never following a
// symlink (O_PATH|O_NOFOLLOW opens the link itself, and fstat says so). nullopt: it is not there
// (the daemon is not running); "": it may be mounted; else why not.
std::optional<std::string> refusal(const Context &ctx, const IpcEndpoint &e)
{
	UniqueFd dir(::open(ctx.real("/").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (dir.get() < 0)
		return std::string("Failed to open / : ") + std::strerror(errno);
	struct stat st = {};
	if (::fstat(dir.get(), &st) < 0)
		return std::string("Failed to stat /: ") + std::strerror(errno);
	if (auto why = untrusted_dir("/", st, false); !why.empty())
		return why;
	const auto parts = fs::split_path(e.path);
	std::string display;
	for (std::size_t i = 0; i < parts.size(); i++) {
		display += "/" + parts[i];
		const bool last = i + 1 == parts.size();
		UniqueFd fd(::openat(dir.get(), parts[i].c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
		if (fd.get() < 0) {
			if (errno == ENOENT)
				return std::nullopt;
			return "Failed to open " + display + ": " + std::strerror(errno);
		}
		if (::fstat(fd.get(), &st) < 0)
			return "Failed to stat " + display + ": " + std::strerror(errno);
		if (S_ISLNK(st.st_mode))
			return display + " is a symbolic link";
		const bool holder = last ? e.kind == IpcKind::Directory : i + 2 == parts.size() && e.kind == IpcKind::Socket;
		if (last && e.kind == IpcKind::Socket) {
			if (!S_ISSOCK(st.st_mode))
				return std::string("it is ") + fs::file_type_name(st.st_mode) + ", not a socket";
			if (st.st_uid != 0)
				return "the socket is owned by UID " + std::to_string(st.st_uid) + ", not by root";
			return std::string();
		}
		if (auto why = untrusted_dir(display, st, holder); !why.empty())
			return why;
		dir = std::move(fd);
	}
	return std::string();
}

}  // namespace

std::vector<std::string> enumerate_ipc(const Context &ctx, std::vector<std::string> &warnings)
{
	std::vector<std::string> out;
	for (const auto &e : IPC_ENDPOINTS) {
		auto why = refusal(ctx, e);
		if (!why)
			continue;  // not running, or never installed: nothing to offer
		if (!why->empty()) {
			warnings.push_back("Not mounting " + std::string(e.path) + " into containers: " + *why);
			continue;
		}
		out.emplace_back(e.path);
	}
	return out;
}

}  // namespace unbounded
