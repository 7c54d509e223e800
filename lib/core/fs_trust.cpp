// What only we may have written: type, owner, mode and link count checked before it is believed.
#include "fs.hpp"

#include "format.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded::fs {

Result<void> check_trusted(int fd, const std::string &display, bool directory)
{
	struct stat st = {};
	if (::fstat(fd, &st) < 0)
		return fail(last_errno_error("Failed to stat " + display));
	if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return fail(errno_error(EPERM, "Refusing " + display + ": it is " + file_type_name(st.st_mode) + ", expected " +
						       (directory ? "a directory" : "a regular file")));
	if (st.st_uid != ::geteuid())
		return fail(errno_error(EPERM, "Refusing " + display + ": owned by UID " + std::to_string(st.st_uid) +
						       ", not by UID " + std::to_string(::geteuid())));
	if (st.st_mode & 022)
		return fail(errno_error(EPERM, "Refusing " + display + ": writable by group or others (mode " +
						       format_mode(st.st_mode) + ")"));
	if (!directory && st.st_nlink != 1)
		return fail(errno_error(EPERM, "Refusing " + display + ": it has " + std::to_string(st.st_nlink) + " hard links"));
	return {};
}

std::expected<TrustedText, TrustedFailure> read_trusted_at(int dirfd, const std::string &dir_display, const std::string &name,
							   const std::string &display, std::size_t max_bytes)
{
	auto failed = [](TrustedStep step, Error e) { return std::unexpected(TrustedFailure{step, std::move(e)}); };
	if (!dir_display.empty())
		if (auto r = check_trusted(dirfd, dir_display, /*directory=*/true); !r)
			return failed(TrustedStep::Directory, std::move(r.error()));
	auto fd = open_regular_at(dirfd, name, display);
	if (!fd)
		return failed(TrustedStep::Open, std::move(fd.error()));
	if (auto r = check_trusted(fd->get(), display, /*directory=*/false); !r)
		return failed(TrustedStep::File, std::move(r.error()));
	auto text = read_fd(fd->get(), display, max_bytes);
	if (!text)
		return failed(TrustedStep::Read, std::move(text.error()));
	return TrustedText{std::move(*fd), std::move(*text)};
}

Result<UniqueFd> open_private_dir(const std::string &path, const std::string &display, mode_t mode)
{
	if (auto r = mkdir_p(dirname(path), 0755); !r)
		return fail(r.error());
	if (::mkdir(path.c_str(), mode) < 0 && errno != EEXIST)
		return fail(last_errno_error("Failed to create directory " + display));
	int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR) {
			struct stat st = {};
			const char *what = ::lstat(path.c_str(), &st) == 0 ? file_type_name(st.st_mode) : "not a directory";
			return fail(errno_error(EPERM, "Refusing " + display + ": it is " + what + ", expected a directory"));
		}
		return fail(last_errno_error("Failed to open directory " + display));
	}
	UniqueFd d(fd);
	if (auto r = check_trusted(d.get(), display, /*directory=*/true); !r)
		return fail(r.error());
	return d;
}

}  // namespace unbounded::fs
